"""``streamtape record --workers N``: N mitmproxy recorders on one port, one cassette.

The real command in front of scripted upstreams on 127.0.0.1. Which worker
recorded an interaction is read from the closing line (each worker's count)
and from the kernel (the processes that hold the listening socket).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape.cassette.model import Outcome
from tests.support.builders import chat_events, wait_until
from tests.support.processes import STREAMTAPE, children, start
from tests.support.recording import recording
from tests.support.servers import ScriptedServer, self_signed_tls, sse_events

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="Linux only")]

PATH = "/v1/chat/completions"


def _post(url: str, i: int, *, verify: bool = True) -> httpx.Response:
    # A client per request: a new connection each time, which the kernel may give to
    # either worker (by a hash of its addresses).
    with httpx.Client(verify=verify, timeout=30) as c:
        return c.post(url + PATH, json={"i": i, "stream": True})


def _numbers(tape: Path) -> list[int]:
    return [json.loads(ix.request.body)["i"] for ix in streamtape.load(tape)]


def _worker_files(tape: Path) -> list[str]:
    return sorted(p.name for p in tape.parent.iterdir() if p.name.startswith(f"{tape.name}.worker"))


def test_two_workers_record_every_request_once_into_one_cassette_in_start_order(tmp_path: Path):
    out = tmp_path / "s.tape"
    with ScriptedServer({PATH: sse_events(chat_events(["Hel", "lo"]), gap=0.005)}) as up:
        with recording(out, "--workers", "2", upstream=up.url) as rec:
            assert "with 2 workers" in rec.stderr
            workers = children(rec.pid)
            assert len(workers) == 2, workers
            for i in range(24):
                assert _post(rec.url, i).status_code == 200
            lines = rec.wait_lines(24)
            assert len(_worker_files(out)) == 2, "each worker writes a file of its own while it runs"
        assert rec.returncode == 0, rec.stderr
    assert len(up.received) == 24
    assert all("complete" in line for line in lines)
    assert _numbers(out) == list(range(24)), "every recording once, in the order the requests started"
    assert _worker_files(out) == [], "the worker files are joined and removed"
    closing = rec.stderr.strip().splitlines()[-1]
    assert closing.startswith(f"streamtape: stopped; 24 interactions saved to {out} (by 2 workers: ")
    a, b = (int(x) for x in closing.split("workers: ")[1].rstrip(")").split(" + "))
    assert a + b == 24 and a > 0 and b > 0, f"the kernel spread 24 connections over both: {closing}"
    assert all(ix.outcome is Outcome.COMPLETE for ix in streamtape.load(out))


def test_a_run_joins_its_recordings_after_those_the_cassette_held(tmp_path: Path):
    out = tmp_path / "s.tape"
    with ScriptedServer({PATH: sse_events(chat_events(["a"]))}) as up:
        with recording(out, upstream=up.url) as rec:
            assert _post(rec.url, 0).status_code == 200
            rec.wait_lines(1)
        with recording(out, "--workers", "2", upstream=up.url) as rec:
            for i in (1, 2, 3):
                assert _post(rec.url, i).status_code == 200
            rec.wait_lines(3)
    assert _numbers(out) == [0, 1, 2, 3]


def test_a_killed_run_leaves_worker_files_the_next_run_joins_with_the_cut_stream_marked(tmp_path: Path):
    out = tmp_path / "s.tape"
    first_piece_read = threading.Event()
    routes = {PATH: sse_events(chat_events(["a"])), "/slow": sse_events(chat_events(["x"] * 200), gap=0.05)}
    with ScriptedServer(routes) as up:
        with recording(out, "--workers", "2", upstream=up.url) as rec:
            for i in range(4):
                assert _post(rec.url, i).status_code == 200
            rec.wait_lines(4)
            workers = children(rec.pid)
            def cut_short() -> None:
                with (
                    contextlib.suppress(httpx.HTTPError),  # the recorder goes mid-stream
                    httpx.stream("POST", rec.url + "/slow", json={"i": 99}, timeout=30) as r,
                ):
                    for _ in r.iter_raw():
                        first_piece_read.set()

            cut = threading.Thread(target=cut_short, daemon=True)
            cut.start()
            # Killed once the client holds a piece: the recorder has the response head by then
            # (a stream killed before its head arrived was never going to be recorded).
            assert first_piece_read.wait(10)
            rec.kill()  # SIGKILL: the parent cannot join anything
            # The workers see their parent gone and stop, each closing its file.
            wait_until(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in workers), timeout=20)
        files = _worker_files(out)
        assert files and all(not f.endswith(".lock") for f in files), files
        kept = [ix for f in files for ix in streamtape.load(tmp_path / f)]
        assert sorted(json.loads(ix.request.body)["i"] for ix in kept) == [0, 1, 2, 3, 99]
        assert not out.exists() or len(streamtape.load(out)) == 0

        with recording(out, "--workers", "2", upstream=up.url) as rec:
            pass
    assert "joined 5 recordings left in worker files of an earlier run" in rec.stderr
    got = streamtape.load(out)
    assert sorted(_numbers(out)) == [0, 1, 2, 3, 99]
    by_number = {json.loads(ix.request.body)["i"]: ix for ix in got}
    assert by_number[99].outcome is not Outcome.COMPLETE, "the stream cut by the stop is marked as cut"
    assert all(by_number[i].outcome is Outcome.COMPLETE for i in range(4))
    assert _worker_files(out) == []


def test_workers_front_an_https_upstream_the_first_keeping_the_http3_port(tmp_path: Path):
    out = tmp_path / "s.tape"
    with ScriptedServer({PATH: sse_events(chat_events(["a"]))}, tls=self_signed_tls()) as up, \
            recording(out, "--workers", "2", "--insecure", upstream=up.url) as rec:
        # mitmproxy listens on UDP too for HTTP/3 to an https:// upstream, and a UDP port
        # takes one process: one worker has it, the other listens on TCP alone.
        assert _udp_sockets_on(rec.port) == 1
        for i in range(6):
            assert _post(rec.url, i).status_code == 200
        rec.wait_lines(6)
    assert rec.returncode == 0, rec.stderr
    assert sorted(_numbers(out)) == list(range(6))


def _udp_sockets_on(port: int) -> int:
    """How many UDP sockets on this machine are bound to ``port`` (from the kernel)."""
    rows = Path("/proc/net/udp").read_text().splitlines()[1:]
    return sum(int(row.split()[1].rsplit(":", 1)[1], 16) == port for row in rows)


def test_a_bad_option_in_the_workers_is_one_error_line_and_exit_2(tmp_path: Path):
    out = tmp_path / "s.tape"
    proc = start([*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out), "--workers", "2",
                  "--upstream", "http://127.0.0.1:9", "--filter", "~q ("])
    code = proc.wait(30)
    assert code == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("streamtape: error:")]
    assert len(errors) == 1 and "--filter" in errors[0] and "invalid filter expression" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert _worker_files(out) == []


def test_a_second_recorder_on_the_cassette_of_a_workers_run_is_refused(tmp_path: Path):
    out = tmp_path / "s.tape"
    with ScriptedServer({PATH: sse_events(chat_events(["a"]))}) as up, \
            recording(out, "--workers", "2", upstream=up.url):
        proc = start([*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out), "--upstream", up.url])
        assert proc.wait(30) != 0
        assert "another writer" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("value", ["0", "x"])
def test_workers_takes_a_positive_count(tmp_path: Path, value: str):
    proc = start([*STREAMTAPE, "record", "-o", str(tmp_path / "s.tape"), "--workers", value,
                  "--upstream", "http://127.0.0.1:9"])
    assert proc.wait(30) == 2
    assert "--workers" in proc.stderr and "Traceback" not in proc.stderr


def test_ctrl_c_to_the_whole_group_stops_every_worker_and_joins(tmp_path: Path):
    # A terminal's Ctrl-C reaches the parent and its workers at once.
    out = tmp_path / "s.tape"
    with ScriptedServer({PATH: sse_events(chat_events(["a"]))}) as up:
        proc = start([*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(out), "--workers", "2",
                      "--upstream", up.url], r"recording on (\S+:\d+)", new_session=True)
        with proc:
            for i in range(4):
                assert _post(proc.url, i).status_code == 200
            proc.wait_lines(4)
            assert proc.stop(signal.SIGINT, timeout=30) == 0, proc.stderr
    assert sorted(_numbers(out)) == [0, 1, 2, 3]
    assert _worker_files(out) == []


def test_shadow_pairs_recorded_by_both_workers_stay_pairs_and_their_counts_add_up(tmp_path: Path):
    out = tmp_path / "s.tape"
    with ScriptedServer({PATH: sse_events(chat_events(["a"]))}) as up, \
            ScriptedServer({PATH: sse_events(chat_events(["b"]))}) as shadow, \
            recording(out, "--workers", "2", "--shadow", shadow.url, "--label-backend", f"{shadow.url}=new",
                      upstream=up.url) as rec:
        for i in range(10):
            assert _post(rec.url, i).status_code == 200
        rec.wait_lines(20)
    assert rec.returncode == 0, rec.stderr
    assert "shadow new: 10 recorded\n" in rec.stderr
    got = streamtape.load(out)
    pairs: dict[str, list[str]] = {}
    for ix in got:
        pairs.setdefault(ix.labels["pair"], []).append(ix.labels["role"])
    assert len(pairs) == 10 and all(sorted(roles) == ["primary", "shadow"] for roles in pairs.values()), pairs
