"""Child processes for the tests and the benchmarks, and what /proc says about them.

:func:`start` is the one way to run a server as a child (``streamtape serve``,
``streamtape record``, mitmdump, llama-server, a scripted upstream of
tests/support/reliability.py, a benchmark's baseline server): it binds port 0
itself, and the address it bound is read from its own startup line ("recording
on HOST:PORT", "replay proxy on ...", mitmdump's "listening at ..."). Picking a
free port first and passing it to the child races with every other process on
the machine; the child binding port 0 cannot.

Both pipes are read on threads from the start, line by line, into
:attr:`Child.out_lines` and :attr:`Child.err_lines` (and :attr:`Child.all_lines`, both
in arrival order), so a child that logs a line per request never blocks on a
full pipe, and a test can wait for a line (:meth:`Child.wait_for`) or count them.
:meth:`Child.stop` sends a signal and waits a bounded time for the exit, then
kills; the whole output is there once it returns.

The readings (:func:`rss_kib`, :func:`peak_rss_kib`, :func:`cpu_s`,
:func:`fd_count`, :func:`children`) come from ``/proc``, for a process or a
process and its children (the workers of ``serve --workers``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Literal

from tests.support import ROOT

STREAMTAPE = [sys.executable, "-m", "streamtape.cli"]
"""``streamtape`` as this interpreter runs it (the checkout's code, whatever is installed)."""

Stream = Literal["stdout", "stderr", "any"]


class StartError(RuntimeError):
    """The child exited, or stayed silent, before it printed its address; says what it printed."""


class Child:
    """A running child process and everything it printed so far (read on threads)."""

    def __init__(self, proc: subprocess.Popen[str], cmd: Sequence[str], *, group: bool = False) -> None:
        self.proc = proc
        self.cmd = list(cmd)
        self.group = group
        """Signals go to the child's process group (it was started in a session of its own)."""
        self.address = ""
        """What the startup pattern's first group matched: ``HOST:PORT`` (or a URL)."""
        self.out_lines: list[str] = []
        self.err_lines: list[str] = []
        self.all_lines: list[str] = []
        """Every line of both streams, in the order they were read."""
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(pipe, into), daemon=True)
            for pipe, into in ((proc.stdout, self.out_lines), (proc.stderr, self.err_lines))
            if pipe is not None
        ]
        for r in self._readers:
            r.start()

    def _read(self, pipe: IO[str], into: list[str]) -> None:
        with contextlib.suppress(ValueError, OSError):  # the pipe closed under us: the child is gone
            for line in pipe:
                with self._changed:
                    into.append(line)
                    self.all_lines.append(line)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    # -- what it is and what it said

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    @property
    def url(self) -> str:
        """``http://`` + :attr:`address` (unless it is a URL already)."""
        return self.address if "://" in self.address else f"http://{self.address}"

    @property
    def port(self) -> int:
        return int(self.address.rstrip("/").rsplit(":", 1)[1])

    @property
    def stdout(self) -> str:
        return "".join(self.out_lines)

    @property
    def stderr(self) -> str:
        return "".join(self.err_lines)

    def _stream(self, stream: Stream) -> list[str]:
        return {"stdout": self.out_lines, "stderr": self.err_lines, "any": self.all_lines}[stream]

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_for(self, pattern: str, stream: Stream = "any", timeout: float = 10.0, *,
                 start: int = 0) -> re.Match[str]:
        """The first line of ``stream`` (from line ``start`` on) matching ``pattern``, waiting up
        to ``timeout`` seconds for it; :class:`StartError` if the child exits or the time runs out."""
        lines = self._stream(stream)
        deadline = time.monotonic() + timeout
        seen = start
        with self._changed:
            while True:
                for line in lines[seen:]:
                    if m := re.search(pattern, line):
                        return m
                seen = max(seen, len(lines))
                left = deadline - time.monotonic()
                done = not any(r.is_alive() for r in self._readers)
                if left <= 0 or done:
                    raise StartError(f"{self._name()}: no line matching {pattern!r} on {stream} "
                                     f"({'it exited' if done else f'{timeout} s'}):\n{self._tail()}")
                self._changed.wait(min(left, 0.1))

    def wait_lines(self, n: int, timeout: float = 10.0, stream: Stream = "stdout") -> list[str]:
        """Wait until ``stream`` holds ``n`` lines (up to ``timeout`` seconds); its lines so far,
        without their line ends."""
        lines = self._stream(stream)
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(lines) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self._name()}: {len(lines)} of {n} lines on {stream} "
                                         f"within {timeout} s:\n{self._tail()}")
                self._changed.wait(min(left, 0.1))
        return [line.rstrip("\n") for line in lines]

    # -- stopping

    def send_signal(self, sig: int) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            if self.group:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)

    def wait(self, timeout: float = 20.0) -> int:
        """Wait up to ``timeout`` seconds for the child to exit (``subprocess.TimeoutExpired``
        if it does not), then for its last output; its exit status."""
        code = self.proc.wait(timeout)
        for r in self._readers:
            r.join(5)
        return code

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20.0, *, must_exit: bool = True) -> int:
        """Send ``sig`` (unless the child has exited) and wait up to ``timeout`` seconds; a child
        still running then is killed, and with ``must_exit`` that is a ``TimeoutError`` saying
        what it printed. The exit status (negative: the signal that ended it)."""
        self.send_signal(sig)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            if must_exit:
                raise TimeoutError(f"{self._name()} did not exit within {timeout} s of "
                                   f"{signal.Signals(sig).name}; killed:\n{self._tail()}") from None
            return self.proc.returncode

    def kill(self) -> int:
        self.send_signal(signal.SIGKILL)
        return self.wait(10)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self.proc.poll() is None:
            self.stop(must_exit=exc_type is None)
        for pipe in (self.proc.stdout, self.proc.stderr, self.proc.stdin):
            if pipe is not None:
                pipe.close()

    def _name(self) -> str:
        return " ".join(self.cmd[:4]) + (" ..." if len(self.cmd) > 4 else "")

    def _tail(self, lines: int = 40) -> str:
        return "".join(self.all_lines[-lines:])

    def __repr__(self) -> str:
        return f"<Child {self.pid} {self._name()!r} at {self.address or '?'} rc={self.proc.returncode}>"


def start(
    cmd: Sequence[str | Path],
    address: str | None = None,
    *,
    stream: Stream = "any",
    timeout: float = 30.0,
    cwd: Path | None = ROOT,
    env: Mapping[str, str] | None = None,
    new_session: bool = False,
    kind: type[Child] = Child,
) -> Child:
    """Start ``cmd`` and wait for the line announcing its address.

    ``address`` is a regular expression whose first group is what :attr:`Child.address`
    becomes (``HOST:PORT``, or a URL); it is looked for on ``stream`` (``any``: stdout or
    stderr). None: do not wait (a child that announces nothing). ``env`` is added to this
    process's environment (with ``PYTHONUNBUFFERED=1``, so a Python child's lines come as
    they are printed); ``new_session`` starts the child in a process group of its own, which
    every signal then goes to (a shell script and what it started). If the child exits or
    stays silent for ``timeout`` seconds it is killed, and :class:`StartError` says what it
    printed. ``kind``: a subclass of :class:`Child` to make (``recording()``'s ``Recorder``).
    """
    args = [str(c) for c in cmd]
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        errors="replace", cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=new_session,
    )
    child = kind(proc, args, group=new_session)
    if address is None:
        return child
    try:
        child.address = child.wait_for(address, stream, timeout).group(1)
    except StartError:
        child.kill()
        raise
    return child


# --------------------------------------------------------------------------- /proc


def _status_kib(pid: int, key: str) -> int:
    """A ``/proc/PID/status`` figure in KiB (``VmRSS``, ``VmHWM``, ...)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise ValueError(f"no {key} for pid {pid}")


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the workers of ``serve --workers``)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return sorted(out)


def _tree(pids: int | Iterable[int], with_children: bool) -> list[int]:
    roots = [pids] if isinstance(pids, int) else list(pids)
    return [p for r in roots for p in ([r, *children(r)] if with_children else [r])]


def rss_kib(pids: int | Iterable[int], *, with_children: bool = False) -> int:
    """Resident memory (``VmRSS``, KiB) of a process, summed over several, and over their
    children too with ``with_children``. A process gone meanwhile counts 0."""
    total = 0
    for p in _tree(pids, with_children):
        with contextlib.suppress(OSError, ValueError):
            total += _status_kib(p, "VmRSS")
    return total


def peak_rss_kib(pid: int) -> int:
    """The most resident memory the process has had (``VmHWM``, KiB)."""
    return _status_kib(pid, "VmHWM")


def cpu_s(pids: int | Iterable[int], *, with_children: bool = False) -> float:
    """CPU time (user + system, seconds) of a process, or several, or them and their children."""
    ticks = 0
    for p in _tree(pids, with_children):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def fd_count(pid: int) -> int:
    """Open file descriptors of a process."""
    return len(os.listdir(f"/proc/{pid}/fd"))
