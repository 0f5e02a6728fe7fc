"""Run the real ``streamtape record`` command as a subprocess, for tests and benchmarks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

STREAMTAPE = [sys.executable, "-m", "streamtape.cli"]


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
        """Read stdout until ``n`` interaction lines have been printed."""
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        while len(self.lines) < n and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line:
                self.lines.append(line.rstrip("\n"))
            else:
                time.sleep(0.02)
        return self.lines


@contextmanager
def recording(out: Path, *args: str, upstream: str | None = None, extra: Sequence[str] = ()) -> Iterator[RecorderProcess]:
    cmd = [*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out), *args, *extra]
    if upstream:
        cmd += ["--upstream", upstream]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    m = re.search(r"recording on [^:]+:(\d+)", first)
    if not m:
        proc.kill()
        out_, err = proc.communicate()
        raise RuntimeError(f"recorder did not start: {first}{err}{out_}")
    rp = RecorderProcess(proc, int(m.group(1)), out)
    try:
        yield rp
    finally:
        if proc.poll() is None:
            rp.stop()
