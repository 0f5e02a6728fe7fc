"""``streamtape record`` for tests, and the CLI in-process.

- :func:`recording`: ``streamtape record`` as a context manager, started with the
  one launcher (tests/support/processes.py): it binds port 0 and its
  "recording on HOST:PORT" line says where.
- :func:`record_scenarios`: one interaction per named scenario, recorded that way.
- :func:`run_main`: any command in-process through the CLI entry point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

import streamtape
from streamtape import Interaction
from streamtape.cli import main
from tests.support.processes import STREAMTAPE, Child, start


class Recorder(Child):
    """A running ``streamtape record``: where it listens, the cassette it writes, the
    interaction lines it printed (stdout, one per interaction)."""

    out: Path

    @property
    def lines(self) -> list[str]:
        """The interaction lines so far, without their line ends."""
        return [line.rstrip("\n") for line in self.out_lines]


@contextmanager
def recording(out: Path, *args: str, upstream: str | None = None, extra: Sequence[str] = ()) -> Iterator[Recorder]:
    """``streamtape record --listen 127.0.0.1:0 -o OUT ARGS`` running for the block (in the
    current directory), then stopped with SIGINT."""
    cmd = [*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out), *args, *extra]
    if upstream:
        cmd += ["--upstream", upstream]
    child = start(cmd, r"recording on (\S+:\d+)", cwd=Path.cwd(), kind=Recorder)
    assert isinstance(child, Recorder)
    child.out = out
    with child:
        yield child


@dataclass(frozen=True)
class Scenarios:
    """A cassette of named scenarios, one interaction each, in the order they were sent."""

    path: Path
    interactions: dict[str, Interaction]
    index: dict[str, int]
    """Each scenario's position in the cassette (``show -i N``)."""


def record_scenarios(out: Path, upstream: str, names: Sequence[str], send: Callable[[str, str], None]) -> Scenarios:
    """Each named scenario recorded once, in order, through the real ``streamtape record``
    in front of ``upstream``. ``send(url, name)`` makes scenario ``name``'s request to the
    recorder at ``url`` and reads its whole response; the upstream tells the scenarios
    apart by the request's ``X-Scenario`` header (:func:`tests.support.servers.by_scenario`)."""
    with recording(out, upstream=upstream) as rec:
        for name in names:
            send(rec.url, name)
        rec.wait_lines(len(names))
    ixs = streamtape.load(out)
    assert len(ixs) == len(names), f"{len(ixs)} interactions recorded for {len(names)} scenarios"
    return Scenarios(out, dict(zip(names, ixs, strict=True)), {n: i for i, n in enumerate(names)})


def run_main(*args: str | Path | int, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The real CLI entry point in-process: exit status, stdout, stderr."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0), out, err
