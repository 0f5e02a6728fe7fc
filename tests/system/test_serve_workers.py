"""``streamtape serve --workers N``: N processes on one port, one log, one journal.

Every test runs the real command (``python -m streamtape.cli serve``) and
talks to it over loopback sockets. Which worker took a connection is read
from the kernel: the sockets each worker process holds open.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape.serve.journal import SharedJournal
from tests.support.builders import CHAT_BODY, EVENTS, MS, chat_ix, wait_until
from tests.support.processes import STREAMTAPE, Child, children, start
from tests.support.servers import raw_request

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="Linux only")

MODELS = ("alpha", "beta", "gamma")
LINE = re.compile(r"^#(\d+) POST /v1/chat/completions -> interaction (\d) of chat\.tape 200 "
                  r"profile=\S+ \d+ pieces \d+ B [\d.]+s outcome=complete$")


@pytest.fixture
def tape(tmp_path: Path) -> Path:
    path = tmp_path / "chat.tape"
    streamtape.save(path, [chat_ix(5, body={**CHAT_BODY, "model": m}) for m in MODELS])
    return path


@pytest.fixture
def slow_tape(tmp_path: Path) -> Path:
    """One recording whose pieces are 2 s apart: streams stay open while a test looks."""
    path = tmp_path / "slow.tape"
    streamtape.save(path, [chat_ix(2000)])
    return path


def _serve(tape: Path, *args: str) -> tuple[Child, str]:
    proc = start([*STREAMTAPE, "serve", str(tape), "--port", "0", *args], r"on http://(\S+?:\d+)")
    return proc, proc.url


@pytest.fixture
def two_workers(tape: Path) -> Iterator[tuple[Child, str]]:
    proc, url = _serve(tape, "--workers", "2", "--profile", "instant")
    try:
        yield proc, url
    finally:
        if proc.running():
            proc.kill()  # the workers see their parent go (its lifeline) and stop


def _workers(proc: Child, n: int) -> list[int]:
    """The pids of ``serve``'s ``n`` worker processes, once all are there."""

    def found() -> list[int] | None:
        pids = children(proc.pid)
        return pids if len(pids) == n else None

    return wait_until(found)


def _sockets(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return n


def _ask(url: str, model: str) -> httpx.Response:
    # A fresh connection each time: the kernel picks a worker per connection.
    with httpx.Client(timeout=10) as c:
        return c.post(url + "/v1/chat/completions", json={**CHAT_BODY, "model": model})


def _stop(proc: Child, sig: int = signal.SIGINT) -> tuple[str, str]:
    proc.stop(sig)
    return proc.stdout, proc.stderr


# --------------------------------------------------------------------------- one port


def test_two_workers_each_accept_connections_on_the_one_port(slow_tape: Path) -> None:
    proc, url = _serve(slow_tape, "--workers", "2")
    try:
        workers = _workers(proc, 2)
        idle = {w: _sockets(w) for w in workers}
        host, port = url.removeprefix("http://").split(":")
        held = []
        for _ in range(24):
            s = socket.create_connection((host, int(port)), timeout=10)
            body = json.dumps(CHAT_BODY).encode()
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            held.append(s)
        for s in held:  # every stream has its head: every connection was accepted
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
        taken = {w: _sockets(w) - idle[w] for w in workers}
        # 24 connections spread by the kernel's hash: both workers hold some of them.
        assert sum(taken.values()) == 24, taken
        assert all(n > 0 for n in taken.values()), taken
        for s in held:
            s.close()
        assert _stop(proc)[1].count("Traceback") == 0
    finally:
        if proc.running():
            proc.kill()


def test_a_port_already_taken_is_one_clean_error(tape: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = subprocess.run([*STREAMTAPE, "serve", str(tape), "--workers", "2", "--port", str(port)],
                             capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in res.stderr
    assert "Traceback" not in res.stderr


def test_workers_do_not_apply_to_the_proxy(tape: Path) -> None:
    res = subprocess.run([*STREAMTAPE, "serve", str(tape), "--proxy", "--workers", "2"],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    assert "--workers does not apply with --proxy" in res.stderr


# --------------------------------------------------------------------------- one log, one journal


def test_every_workers_lines_come_out_of_serve_whole_and_numbered_once(
    two_workers: tuple[Child, str],
) -> None:
    proc, url = two_workers
    for i in range(30):
        r = _ask(url, MODELS[i % 3])
        assert r.text == "".join(e.decode() for e in EVENTS)
    out, err = _stop(proc)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert len(lines) == 30, out
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    numbers = sorted(int(m.group(1)) for m in parsed if m)
    assert numbers == list(range(1, 31))  # one counter for all workers
    spread = re.search(r"served 30 requests, 0 unmatched \(by worker: (\d+), (\d+)\)", err)
    assert spread, err
    assert int(spread.group(1)) + int(spread.group(2)) == 30


def test_journal_on_any_worker_lists_every_request_at_once(
    two_workers: tuple[Child, str],
) -> None:
    _, url = two_workers
    asked: list[str] = []
    for i in range(12):
        model = MODELS[i % 3]
        assert _ask(url, model).status_code == 200
        asked.append(model)
        # Right after the response, on a new connection (maybe the other worker).
        with httpx.Client(timeout=10) as c:
            seen = c.get(url + "/_streamtape/requests").json()
        assert [json.loads(e["body"])["model"] for e in seen] == asked
        assert [e["matched"] for e in seen] == [MODELS.index(m) for m in asked]
    missing = httpx.post(url + "/v1/chat/completions", json={**CHAT_BODY, "model": "nope"})
    assert missing.status_code == 422
    last = httpx.get(url + "/_streamtape/requests").json()[-1]
    assert last["matched"] is None and "no recorded interaction matches" in last["error"]


# --------------------------------------------------------------------------- stopping


def test_ctrl_c_stops_every_worker_and_adds_up_their_counts(
    two_workers: tuple[Child, str],
) -> None:
    proc, url = two_workers
    workers = _workers(proc, 2)
    for i in range(8):
        _ask(url, MODELS[i % 3])
    httpx.post(url + "/v1/chat/completions", json={**CHAT_BODY, "model": "nope"})
    _, err = _stop(proc, signal.SIGINT)
    assert proc.returncode == 0, err
    assert "served 8 requests, 1 unmatched" in err
    assert "Traceback" not in err
    for w in workers:
        assert not Path(f"/proc/{w}").exists() or "Z" in Path(f"/proc/{w}/stat").read_text()


def test_a_worker_that_dies_stops_the_server_with_an_error(
    two_workers: tuple[Child, str],
) -> None:
    proc, _ = two_workers
    workers = _workers(proc, 2)
    os.kill(workers[1], signal.SIGKILL)
    proc.wait(timeout=20)
    err = proc.stderr
    assert proc.returncode == 2
    assert "worker 1 stopped on its own (exit status -9)" in err
    assert "Traceback" not in err
    wait_until(lambda: not children(proc.pid) or None, timeout=10)


# --------------------------------------------------------------------------- timing


@pytest.mark.realtime
def test_each_worker_plays_its_streams_on_time(tmp_path: Path) -> None:
    path = tmp_path / "timed.tape"
    streamtape.save(path, [chat_ix(20)])
    proc, url = _serve(path, "--workers", "2")
    try:
        errors: list[int] = []
        for _ in range(6):  # fresh connections: both workers play some
            r = raw_request(url)
            assert r.ending == "complete"
            arrivals = [t for t, _ in r.chunks]
            errors += [abs((b - a) - 20 * MS) for a, b in itertools.pairwise(arrivals)]
        # Generous for a loaded machine; a worker without its own clock would be off by ms.
        assert statistics.median(errors) < 3 * MS, errors
    finally:
        _stop(proc)


# --------------------------------------------------------------------------- the journal itself


def test_shared_journal_merges_writers_in_the_order_they_wrote(tmp_path: Path) -> None:
    a, b = SharedJournal(tmp_path, 0), SharedJournal(tmp_path, 1)
    for i in range(6):
        (a if i % 2 else b).append({"n": i})
        time.sleep(0.001)
    assert [e["n"] for e in a] == list(range(6))
    assert [e["n"] for e in b] == list(range(6))


def test_shared_journal_keeps_the_newest_entries_and_bounds_each_file(tmp_path: Path) -> None:
    j = SharedJournal(tmp_path, 0, keep=5)
    for i in range(23):
        j.append({"n": i})
    assert [e["n"] for e in j] == [18, 19, 20, 21, 22]
    # Rewritten once it held 2 * keep lines: never more than that on disk.
    assert len(j.path.read_text().splitlines()) < 10


def test_shared_journal_skips_a_line_still_being_written(tmp_path: Path) -> None:
    j = SharedJournal(tmp_path, 0)
    j.append({"n": 1})
    with (tmp_path / "1.jsonl").open("w") as other:
        other.write('[12, {"n": 2')  # another worker mid-write
    assert [e["n"] for e in j] == [1]
