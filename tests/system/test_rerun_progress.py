"""``streamtape rerun``'s live progress line: on a terminal only, on stderr, redrawn in place.

Real parts: ``streamtape rerun`` as a subprocess, its stderr a pseudo-terminal
(the ``pty`` module) or a pipe, its stdout a pipe; a scripted backend on
127.0.0.1 (tests/support/rerun_backends.py) slow enough that requests are in
flight while the line is redrawn (every 0.25 s).
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import threading
from pathlib import Path

import pytest

from tests.support.processes import STREAMTAPE
from tests.support.rerun_backends import Arrivals, slower, write_session
from tests.support.servers import ScriptedServer

N = 20
OFFSETS = [n * 0.1 for n in range(N)]  # about 2 s of sending: several redraws
CLEAR = "\r\033[K"
FRAME = re.compile(rf"sent (\d+)/{N}  done (\d+)  failed (\d+)  in flight (\d+)  TTFT p50 (-|\d[\d.]* ms)")
FINAL = f"sent {N}/{N}  done {N}  failed 0  TTFT p50 "


def _run(session: Path, url: str, out: Path, *, stderr_tty: bool) -> tuple[int, str, str]:
    """Run the rerun; stderr a pty's slave end (read whole from the master) or a pipe."""
    cmd = [*STREAMTAPE, "rerun", str(session), "--upstream", url, "-o", str(out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TERM": "xterm"}
    if not stderr_tty:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    got = bytearray()

    def drain() -> None:  # read as it comes, so the child never blocks on a full pty buffer
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end (it exited)
                return
            if not data:
                return
            got.extend(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    stdout, _ = proc.communicate(timeout=120)
    reader.join(10)
    os.close(master)
    return proc.returncode, stdout.decode(), got.decode().replace("\r\n", "\n")  # the tty's onlcr


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return write_session(tmp_path / "session.tape", OFFSETS)


@pytest.mark.slow
def test_on_a_terminal_the_progress_line_is_redrawn_on_stderr_and_the_summary_gives_the_final_totals(
        tmp_path: Path, session: Path) -> None:
    seen = Arrivals()
    with ScriptedServer({"/v1/chat/completions": seen.stamped(slower(0.2))}) as up:
        code, out, err = _run(session, up.url, tmp_path / "out.tape", stderr_tty=True)
    assert code == 0, err
    assert len(seen.requests) == N
    start, _, frames_text = err.partition(CLEAR)
    assert start.startswith(f"streamtape: re-running {N} request(s) of {session} against ")
    assert start.endswith("; Ctrl-C to stop\n")
    # Every redraw clears the line first and ends without a newline; the last thing
    # written is a bare clear, leaving the terminal's line empty for the summary.
    assert err.endswith(CLEAR) and "\n" not in frames_text
    frames = [f for f in frames_text.split(CLEAR) if f]
    assert len(frames) >= 3, frames  # about 2.5 s of work at one redraw per 0.25 s
    parsed = [FRAME.fullmatch(f) for f in frames]
    assert all(parsed), frames
    counts = [tuple(int(m.group(i)) for i in range(1, 5)) for m in parsed if m]
    sent, done = [c[0] for c in counts], [c[1] for c in counts]
    assert sent == sorted(sent) and done == sorted(done) and all(c[2] == 0 for c in counts)
    assert all(s == d + f + fl for s, d, f, fl in counts), counts  # sent = done + failed + in flight
    assert max(c[3] for c in counts) > 0  # each answer takes about 0.34 s: some were in flight
    assert any(m and m.group(5).endswith(" ms") for m in parsed)  # a TTFT once an answer was done
    assert sent[-1] <= N
    # The summary (stdout, not the progress stream) gives the final totals, with no
    # "in flight" once nothing is.
    lines = out.splitlines()
    assert lines[0].startswith(FINAL) and lines[0].endswith(" ms"), out
    assert "in flight" not in out and CLEAR not in out
    assert lines[-1] == f"  wrote {tmp_path / 'out.tape'}; compare: streamtape diff {tmp_path / 'out.tape'}"


@pytest.mark.slow
def test_when_stderr_is_not_a_terminal_no_progress_line_is_written(tmp_path: Path, session: Path) -> None:
    with ScriptedServer({"/v1/chat/completions": Arrivals().stamped(slower(0.2))}) as up:
        code, out, err = _run(session, up.url, tmp_path / "out.tape", stderr_tty=False)
    assert code == 0, err
    assert err.startswith(f"streamtape: re-running {N} request(s) of {session} against ")
    assert err.count("\n") == 1 and "\r" not in err and "\033" not in err and "in flight" not in err
    assert out.splitlines()[0].startswith(FINAL)
