"""The benchmarks' C load (bench/upstream.c, bench/loadgen.c): the figures of
``bench/record_timing.py`` are only as true as the write times the upstream stamps and
the client reads back, so both are checked here against each other, byte for byte."""

from __future__ import annotations

import re
import shutil
import signal
from pathlib import Path

import pytest

from bench import _loadgen
from tests.support.processes import start
from tests.support.reliability import request_bytes

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")]

MS = 1_000_000


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("load")
    client, why = _loadgen.build(tmp)
    upstream, why_up = _loadgen.build(tmp, _loadgen.UPSTREAM_C)
    assert client and upstream, why or why_up
    return client, upstream


def event(client: str, i: int, t: int, pad: int) -> bytes:
    return b'data: {"c": "%s", "i": %d, "t": %d, "pad": "%s"}\n\n' % (client.encode(), i, t, b"x" * pad)


def test_every_event_carries_its_write_time_and_the_client_reads_it_back(tools: tuple[Path, Path]) -> None:
    client, upstream = tools
    up = start([str(upstream), "5", "10", "7"], r"upstream on (\S+:\d+)")
    try:
        got = _loadgen.run(client, up.port, request_bytes("/v1/chat/completions?c=ab7"), 3, 0.1, 1,
                           timeout=60, even=True, stamps=True)
    finally:
        up.stop(signal.SIGTERM, timeout=10)
    for s in got.streams:
        assert (s.status, s.http_status, len(s.arrivals)) == ("ok", 200, 5)
        assert s.stamps is not None and len(s.stamps) == 5
        # The body is the upstream's events with exactly the times the client read from them.
        assert s.exact(b"".join(event("ab7", i, t, 7) for i, t in enumerate(s.stamps)))
        assert all(w < at for w, at in zip(s.stamps, s.arrivals, strict=True))
        # Absolute deadlines 10 ms apart from the first write: never early, whatever the load.
        assert s.stamps == sorted(s.stamps) and s.stamps[-1] - s.stamps[0] >= 40 * MS - MS // 10
    firsts = [s.stamps[0] for s in got.streams if s.stamps]
    assert firsts == sorted(firsts)  # -e: stream i starts at i * 0.1 s / 3


def test_the_upstream_takes_a_request_with_a_body_and_keeps_the_connection(tools: tuple[Path, Path]) -> None:
    import socket

    _, upstream = tools
    up = start([str(upstream), "2", "1"], r"upstream on (\S+:\d+)")
    try:
        with socket.create_connection(("127.0.0.1", up.port), timeout=10) as conn:
            got = b""
            for n in (1, 2):  # two requests, one after the other, on one connection
                conn.sendall(request_bytes(f"/x?c=r{n}", body=b'{"stream": true, "pad": "' + b"y" * 3000 + b'"}'))
                while not got.endswith(b"0\r\n\r\n") or got.count(b"0\r\n\r\n") < n:
                    got += conn.recv(65536)
    finally:
        up.stop(signal.SIGTERM, timeout=10)
    assert got.count(b"HTTP/1.1 200 OK\r\n") == 2
    assert re.findall(rb'"c": "(\w+)", "i": (\d)', got) == [(b"r1", b"0"), (b"r1", b"1"), (b"r2", b"0"), (b"r2", b"1")]


def test_the_upstream_says_how_to_call_it(tools: tuple[Path, Path]) -> None:
    import subprocess

    _, upstream = tools
    out = subprocess.run([str(upstream), "3", "soon"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and out.stderr.startswith("usage:")
