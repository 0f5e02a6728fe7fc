"""Run the real streamtape (and mitmdump) commands for tests.

- :func:`start_listening`: start a server process on port 0 and read the
  address it bound from its own startup line ("recording on HOST:PORT",
  "replay proxy on ...", mitmdump's "listening at ..."). Picking a free port
  first and passing it to the child races with every other process on the
  machine; the child binding port 0 cannot.
- :func:`recording`: ``streamtape record`` as a context manager.
- :func:`record_scenarios`: one interaction per named scenario, recorded that way.
- :func:`run_main`: any command in-process through the CLI entry point.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

import streamtape
from streamtape import Interaction
from streamtape.cli import main
from tests.support import ROOT
from tests.support.builders import wait_until

STREAMTAPE = [sys.executable, "-m", "streamtape.cli"]


def start_listening(
    cmd: Sequence[str],
    address: str,
    *,
    merge_stderr: bool = False,
    timeout: float = 30,
    cwd: Path = ROOT,
) -> tuple[subprocess.Popen[str], str]:
    """Start ``cmd`` and wait for the line announcing its address.

    ``address`` is a regular expression whose first group is ``HOST:PORT``; it is
    looked for in the child's stderr (or its stdout, when ``merge_stderr`` sends
    stderr there). Returns the running process and ``http://HOST:PORT``. If the
    child exits or stays silent for ``timeout`` seconds, it is killed and the
    test fails with what it printed.
    """
    proc = subprocess.Popen(
        list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        text=True, cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    stream: IO[str] | None = proc.stdout if merge_stderr else proc.stderr
    assert stream is not None
    seen: list[str] = []
    found: list[str] = []

    def read() -> None:
        # readline blocks: on a thread, so a silent child cannot hang the test.
        for line in stream:
            seen.append(line)
            if m := re.search(address, line):
                found.append(m.group(1))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if not found:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{cmd[:4]} did not report its address ({address!r}):\n{''.join(seen)}{out}{err or ''}")
    return proc, f"http://{found[0]}"


@dataclass
class RecorderProcess:
    proc: subprocess.Popen[str]
    port: int
    out: Path
    stdout: str = ""
    stderr: str = ""
    lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=timeout)
        self.stdout += out
        self.stderr += err
        return self.proc.returncode

    def wait_lines(self, n: int, timeout: float = 10) -> list[str]:
        """Read stdout until ``n`` interaction lines have been printed (fails after ``timeout``)."""
        assert self.proc.stdout is not None
        stdout = self.proc.stdout
        os.set_blocking(stdout.fileno(), False)

        def enough() -> bool:
            while line := stdout.readline():
                self.lines.append(line.rstrip("\n"))
            return len(self.lines) >= n

        wait_until(enough, timeout)
        return self.lines


@contextmanager
def recording(out: Path, *args: str, upstream: str | None = None, extra: Sequence[str] = ()) -> Iterator[RecorderProcess]:
    """``streamtape record --listen 127.0.0.1:0 -o OUT ARGS`` running for the block, then stopped with SIGINT."""
    cmd = [*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out), *args, *extra]
    if upstream:
        cmd += ["--upstream", upstream]
    proc, url = start_listening(cmd, r"recording on (\S+:\d+)", cwd=Path.cwd())
    rp = RecorderProcess(proc, int(url.rsplit(":", 1)[1]), out)
    try:
        yield rp
    finally:
        if proc.poll() is None:
            rp.stop()


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


def run_main(*args: str | Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The real CLI entry point in-process: exit status, stdout, stderr."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0), out, err
