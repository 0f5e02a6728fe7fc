"""The shipped locustfile: a Locust master and two workers, headless, against a scripted backend.

Real parts: ``locust`` itself (three processes), the locustfile that
``streamtape rerun --locustfile`` names, a scripted server on 127.0.0.1
(tests/support/rerun_backends.py), ``streamtape merge`` and ``diff``.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
import socket
import sys
from pathlib import Path

import pytest

import streamtape
from tests.support.processes import start
from tests.support.recording import run_main
from tests.support.rerun_backends import Arrivals, faithful, write_session
from tests.support.servers import ScriptedServer

# Never imported here: importing locust monkey-patches this process for gevent.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("locust") is None,
                                reason="needs Locust (the test extra installs it)")

CALLS = 7


def locust_command() -> list[str]:
    exe = Path(sys.executable).with_name("locust")
    return [str(exe)] if exe.exists() else [shutil.which("locust") or "locust"]


def free_port() -> int:
    """A port for the master (Locust's workers must be told it: it cannot bind port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_master_and_two_workers_send_every_request_once_and_report_ttft_and_itl(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.05 * n for n in range(CALLS)])
    code, out, _ = run_main("rerun", "--locustfile", capsys=capsys)
    locustfile = out.strip()
    seen = Arrivals()
    port = free_port()
    with ScriptedServer({"/v1/chat/completions": seen.stamped(faithful())}) as up:
        common = ["-f", locustfile, "--streamtape-cassette", str(session), "--streamtape-out", str(tmp_path / "out.tape")]
        master = start([*locust_command(), *common, "--master", "--master-bind-host", "127.0.0.1",
                        "--master-bind-port", str(port), "--headless", "--expect-workers", "2", "-u", "4", "-r", "4",
                        "-t", "60s", "-H", up.url, "--csv", str(tmp_path / "stats")],
                       r"(Waiting for workers)", cwd=tmp_path, timeout=60)
        with master:
            workers = [start([*locust_command(), *common, "--worker", "--master-host", "127.0.0.1",
                              "--master-port", str(port)], None, cwd=tmp_path) for _ in range(2)]
            try:
                assert master.proc.wait(90) == 0, master._tail()
            finally:
                for w in workers:
                    w.stop(must_exit=False)
    bodies = sorted(json.loads(r.body)["messages"][0]["content"] for r in seen.requests)
    assert bodies == sorted(f"question {n}" for n in range(CALLS))  # each once, across the workers
    rows = {(r["Type"], r["Name"]): r for r in csv.DictReader((tmp_path / "stats_stats.csv").open())}
    assert int(rows[("stream", "/v1/chat/completions")]["Request Count"]) == CALLS
    assert int(rows[("stream", "/v1/chat/completions")]["Failure Count"]) == 0
    assert int(rows[("TTFT", "/v1/chat/completions")]["Request Count"]) == CALLS
    assert 5 < float(rows[("TTFT", "/v1/chat/completions")]["Median Response Time"]) < 200
    assert int(rows[("ITL", "/v1/chat/completions")]["Request Count"]) == CALLS * 6  # 7 words: 6 gaps each
    parts = sorted(tmp_path.glob("out.worker*.tape"))
    assert [p.name for p in parts] == ["out.worker0.tape", "out.worker1.tape"]
    assert all(len(streamtape.load(p)) > 0 for p in parts)
    code, _, err = run_main("merge", *parts, "-o", tmp_path / "out.tape", capsys=capsys)
    assert code == 0, err
    code, stdout, _ = run_main("diff", tmp_path / "out.tape", "--json", capsys=capsys)
    summary = json.loads(stdout)["summary"]
    assert code == 0 and summary["agree"] == CALLS and summary["load"]["b"]["requests"] == CALLS
