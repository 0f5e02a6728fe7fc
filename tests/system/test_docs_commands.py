"""The shell commands of the documentation pages run, and print what the pages say they print.

Every ```` ```console ```` block of ``docs/`` is a test: its ``$ `` lines are
commands, run with bash in a scratch folder that holds the shipped
``cassettes/`` (and with this environment's ``streamtape`` first on the PATH),
and the lines after each are its output (stdout and stderr together), compared
exactly. An HTML comment just above a block changes that:

- ``<!-- doc-test: skip reason="..." -->``: the block needs something a test
  run does not have (a live server, an install); the test is skipped with the
  reason. This applies to ```` ```sh ```` blocks too, which are otherwise not run.
- ``<!-- doc-test: loose reason="..." -->``: numbers may differ (a replay's
  own timing); everything else must match.
- ``<!-- doc-test: status=N -->``: the last command exits with N (default 0).

```` ```sh ```` blocks without a marker are shown, not run: they hold commands
for the reader's own setup (an upstream at a made-up address). The test also
fails for a marker that no block follows, so a marker cannot hide a block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import ROOT

DOCS = ROOT / "docs"
MARKER = re.compile(r"<!-- doc-test: (?P<kind>skip|loose|status=\d+)(?: reason=\"(?P<reason>[^\"]*)\")? -->")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    text: str
    marker: str | None
    reason: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    out: list[Block] = []
    for path in sorted(DOCS.rglob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        marker: tuple[str, str | None, int] | None = None
        i = 0
        while i < len(lines):
            m = MARKER.fullmatch(lines[i].strip())
            if m:
                marker = (m.group("kind"), m.group("reason"), i)
                i += 1
                continue
            f = FENCE.match(lines[i])
            if f and f.group("lang"):
                start = i
                i += 1
                body = []
                while i < len(lines) and not lines[i].startswith("```"):
                    body.append(lines[i])
                    i += 1
                near = marker is not None and marker[2] == start - 1
                out.append(Block(str(path.relative_to(DOCS)), start + 1, f.group("lang"), "\n".join(body),
                                 marker[0] if near and marker else None, marker[1] if near and marker else None))
                if marker is not None and not near:
                    raise AssertionError(f"{path}:{marker[2] + 1}: a doc-test marker not right above a block")
                marker = None
            elif lines[i].strip() and marker is not None:
                raise AssertionError(f"{path}:{marker[2] + 1}: a doc-test marker not right above a block")
            i += 1
    return out


ALL = blocks()
RUN = [b for b in ALL if b.lang == "console" or b.marker == "skip"]


def commands(text: str) -> list[tuple[str, list[str]]]:
    """The ``$ `` commands of a console block, each with the output lines under it."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            assert out, f"output before the first command: {line!r}"
            out[-1][1].append(line)
    return out


def _loose(s: str) -> str:
    return re.sub(r"\d+(?:\.\d+)?", "N", s)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("docs")
    (d / "cassettes").symlink_to(ROOT / "cassettes")
    return d


def test_the_tutorial_pages_have_blocks_the_test_runs() -> None:
    ran = {b.page for b in RUN if b.marker != "skip"}
    assert "getting-started.md" in ran and "guide/inspect.md" in ran


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_the_commands_of_a_docs_block_print_what_the_page_shows(block: Block, scratch: Path) -> None:
    if block.marker == "skip":
        pytest.skip(f"{block.id}: {block.reason or 'marked skip'}")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "NO_COLOR": "1", "COLUMNS": "200"}
    steps = commands(block.text)
    assert steps, f"{block.id}: a console block with no command"
    for n, (cmd, expected) in enumerate(steps):
        r = subprocess.run(["bash", "-c", f"{cmd} 2>&1"], cwd=scratch, env=env, capture_output=True, text=True,
                           timeout=120)
        want_status = int(block.marker.split("=")[1]) if block.marker and block.marker.startswith("status=") \
            and n == len(steps) - 1 else 0
        assert r.returncode == want_status, f"{block.id}: {cmd!r} exited {r.returncode}\n{r.stdout}"
        got = r.stdout.rstrip("\n").splitlines()
        if block.marker == "loose":
            assert [_loose(x) for x in got] == [_loose(x) for x in expected], f"{block.id}: {cmd!r}"
        else:
            assert got == expected, f"{block.id}: {cmd!r}"
