"""The replay server under abuse: it answers or closes every bad client, bounds what each
one costs, and keeps serving everyone else.

- Malformed HTTP (a TLS ClientHello, a bad request line, bad Content-Length
  values, a bad chunk size, a head over 64 KiB, an obsolete line fold, an
  HTTP/2 preface) gets its 4xx (or, for TLS, a close), one ``bad_request`` log
  line, no traceback, and the next client is served.
- A request body over the limit gets a 413 before the server reads it (the
  CLI's default 16 MiB, and ``--max-body``), even while the client is still
  sending; one at the limit is read.
- A client that never reads: the server stops writing at its high-water mark
  and drops the connection after the client timeout, logged with the bytes
  that were waiting; a client beside it is served on time.
- ``serve`` listens on 127.0.0.1 unless told otherwise, and warns when told.
- Serving a folder never reads a file outside it: links leading out, and
  entries that are no regular file, are skipped and named.
- 1,000 concurrent realtime streams through a real ``streamtape serve`` with
  5% of the clients hanging up mid-stream: the others get every byte on time,
  and the server's open descriptors and memory come back to where they were.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import re
import signal
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape.serve import ReplayServer
from streamtape.serve.guard import exposure_warning
from streamtape.stats import percentile
from tests.support.builders import CHAT_BODY, EVENTS, MS, chat_ix, interaction, wait_until
from tests.support.processes import STREAMTAPE, Child, fd_count, rss_kib, start
from tests.support.reliability import exchange, fetch_many, raise_fd_limit, request_bytes

PATH = "/v1/chat/completions"


@pytest.fixture
def lines() -> list[str]:
    return []


@pytest.fixture
def server(lines: list[str]) -> Iterator[ReplayServer]:
    with ReplayServer([chat_ix(gap_ms=1)], profile="instant", log=lines.append, max_body=1 << 20,
                      client_timeout=2.0) as s:
        yield s


def status_of(response: bytes) -> int | None:
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", response)
    return int(m.group(1)) if m else None


TLS_CLIENT_HELLO = bytes.fromhex("160301") + (200).to_bytes(2, "big") + bytes.fromhex("010000c40303") + bytes(194)


@pytest.mark.parametrize(
    ("data", "status"),
    [
        pytest.param(TLS_CLIENT_HELLO, None, id="tls-client-hello"),
        pytest.param(b"HELLO\r\n\r\n", 400, id="bad-request-line"),
        pytest.param(b"GET /x HTTP/1.1 extra\r\n\r\n", 400, id="request-line-four-parts"),
        pytest.param(b"POST /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400, id="content-length-not-a-number"),
        pytest.param(b"POST /x HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400, id="content-length-negative"),
        pytest.param(b"POST /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef", 400,
                     id="content-length-twice-differing"),
        pytest.param(b"POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
                     id="content-length-and-chunked"),
        pytest.param(b"POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400, id="transfer-encoding-gzip"),
        pytest.param(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n", 400,
                     id="bad-chunk-size"),
        pytest.param(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nab\r\n0\r\n\r\n", 400,
                     id="negative-chunk-size"),
        pytest.param(b"GET /x HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431, id="head-over-64KiB"),
        pytest.param(b"GET /x HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", 400, id="obsolete-line-fold"),
        pytest.param(b"GET /x HTTP/1.1\r\nBad Name: 1\r\n\r\n", 400, id="space-in-header-name"),
        pytest.param(b"GET /x HTTP/1.1\r\nX-A: a\nb\r\n\r\n", 400, id="bare-lf-in-a-header"),
        pytest.param(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, id="http2-preface"),
    ],
)
def test_malformed_http_gets_an_answer_or_a_close_and_the_server_keeps_serving(
    server: ReplayServer, lines: list[str], caplog: pytest.LogCaptureFixture, data: bytes, status: int | None
) -> None:
    with caplog.at_level(logging.ERROR):
        answer = exchange(server.port, data)
        if status is None:
            assert answer == b""  # closed without a word: it is no HTTP client
        else:
            assert status_of(answer) == status, answer[:200]
            assert b"Connection: close" in answer and b'"streamtape_bad_request"' in answer
        # The next client is served as if nothing happened.
        r = httpx.post(server.url + PATH, json=CHAT_BODY, timeout=10)
        assert r.status_code == 200 and r.content == b"".join(p.data for p in chat_ix().response.pieces)  # type: ignore[union-attr]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    bad = [x for x in lines if "outcome=bad_request" in x]
    assert len(bad) == 1 and (f" {status} " in bad[0] if status else " - - outcome" in bad[0])


def test_a_request_head_that_never_ends_gets_a_408_after_the_client_timeout(
    server: ReplayServer, lines: list[str]
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        t0 = time.monotonic()
        answer = s.recv(65536)
        waited = time.monotonic() - t0
    assert status_of(answer) == 408
    assert 1.5 <= waited <= 10  # the client timeout is 2 s
    assert any("408 outcome=bad_request: the request did not arrive in full within 2 s" in x for x in lines)


def test_a_body_over_the_limit_gets_a_413_before_it_is_read(server: ReplayServer, lines: list[str]) -> None:
    big = b"x" * ((1 << 20) + 1)
    r = httpx.post(server.url + PATH, content=big, timeout=10)
    assert r.status_code == 413
    assert "over the limit of 1048576 bytes" in r.json()["error"]["message"]
    # Asked to wait for a 100 Continue, the client gets the 413 instead and sends nothing.
    head = (f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(big)}\r\n"
            "Expect: 100-continue\r\n\r\n").encode()
    answer = exchange(server.port, head)
    assert status_of(answer) == 413 and b"100 Continue" not in answer
    # Chunked, the count is kept as the chunks come.
    chunked = b"".join(b"%x\r\n%s\r\n" % (65536, b"y" * 65536) for _ in range(17)) + b"0\r\n\r\n"
    answer = exchange(server.port, f"POST {PATH} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
                      + chunked)
    assert status_of(answer) == 413
    # One at the limit is read (it matches no recording: a 422 that names the request).
    r = httpx.post(server.url + PATH, content=b"x" * (1 << 20), timeout=10)
    assert r.status_code == 422
    assert sum("413 outcome=bad_request" in x for x in lines) == 3


@pytest.mark.slow
def test_the_cli_takes_16_mib_bodies_by_default_and_max_body_sets_another_limit(tmp_path: Path) -> None:
    tape = tmp_path / "t.tape"
    streamtape.save(tape, [chat_ix()])
    for args, limit in ([], 16 * 1024 * 1024), (["--max-body", "1000"], 1000):
        with serve_cli(str(tape), *args) as proc:
            assert httpx.post(proc.url + PATH, content=b"x" * (limit + 1), timeout=30).status_code == 413
            assert httpx.post(proc.url + PATH, content=b"x" * limit, timeout=30).status_code == 422
            proc.stop(signal.SIGTERM)


def test_a_client_that_never_reads_is_dropped_after_the_timeout_with_bounded_buffering(
    lines: list[str],
) -> None:
    piece = 8 * 1024
    big = interaction([b"d" * piece] * 1000, gap_ns=MS, url="http://upstream.test/big")  # 8 MiB
    with ReplayServer([big, chat_ix(gap_ms=50)], profile="instant", log=lines.append,
                      client_timeout=1.0) as server:
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect(("127.0.0.1", server.port))
        stuck.sendall(request_bytes("/big"))
        t0 = time.monotonic()
        # Meanwhile another client is served, on its recorded timing (faithful by header).
        r = httpx.post(server.url + PATH, json=CHAT_BODY, timeout=10,
                       headers={"X-Streamtape-Profile": "faithful"})
        assert r.status_code == 200
        wait_until(lambda: any("client_stalled" in x for x in lines), 15)
        dropped_after = time.monotonic() - t0
        received = 0
        with contextlib.suppress(ConnectionResetError):
            stuck.settimeout(5)
            while chunk := stuck.recv(1 << 20):
                received += len(chunk)
        stuck.close()
    (line,) = [x for x in lines if "client_stalled" in x]
    waiting = int(re.search(r"with (\d+) bytes waiting", line).group(1))  # type: ignore[union-attr]
    # The player stops writing past 64 KiB buffered (checked every 16 pieces).
    assert waiting <= 64 * 1024 + 16 * (piece + 16)
    assert received < 4 * 1024 * 1024  # most of the 8 MiB was never produced
    assert 1.0 <= dropped_after < 10
    assert "the client read nothing for 1 s" in line


def test_serve_listens_on_loopback_by_default_and_warns_on_any_other_address(tmp_path: Path) -> None:
    tape = tmp_path / "t.tape"
    streamtape.save(tape, [chat_ix()])
    for args, host, warned in ([], "127.0.0.1", False), (["--host", "0.0.0.0"], "0.0.0.0", True):
        with serve_cli(str(tape), *args) as proc:
            proc.stop(signal.SIGTERM)
        assert proc.url.startswith(f"http://{host}:")
        warning = "streamtape: warning: listening on every interface (0.0.0.0)"
        assert any(warning in x for x in proc.err_lines) is warned, proc.err_lines


def serve_cli(*args: str) -> Child:
    """``streamtape serve ARGS --port 0`` running, once its stderr says where it listens
    (warnings come before that line)."""
    return start([*STREAMTAPE, "serve", *args, "--port", "0"], r" on (http://\S+:\d+) ")


@pytest.mark.parametrize(
    ("host", "warned"),
    [("127.0.0.1", False), ("127.0.0.2", False), ("::1", False), ("localhost", False),
     ("0.0.0.0", True), ("::", True), ("192.168.1.7", True), ("example.org", True)],
)
def test_exposure_warning_is_for_every_address_but_loopback(host: str, warned: bool) -> None:
    assert (exposure_warning(host) is not None) is warned


def test_serving_a_folder_never_reads_a_file_outside_it(tmp_path: Path, lines: list[str],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    folder, outside = tmp_path / "cassettes", tmp_path / "private"
    folder.mkdir()
    outside.mkdir()
    streamtape.save(folder / "inside.tape", [interaction(EVENTS, url="http://upstream.test/inside")])
    streamtape.save(outside / "secret.tape", [interaction(EVENTS, url="http://upstream.test/secret")])
    (folder / "secret.tape").symlink_to(outside / "secret.tape")
    (folder / "sub").mkdir()
    (folder / "up.tape").symlink_to("../private/secret.tape")
    os.mkfifo(folder / "pipe.tape")  # reading it would block for ever
    # The CLI: warns about each entry it skips, serves only what is inside.
    with serve_cli(str(folder)) as proc:
        assert httpx.post(proc.url + "/inside", json={"stream": True}, timeout=10).status_code == 200
        assert httpx.post(proc.url + "/secret", json={"stream": True}, timeout=10).status_code == 422
        proc.stop(signal.SIGTERM)
    head = proc.err_lines
    skipped = sorted(x for x in head if "skipped" in x)
    assert len(skipped) == 3, head
    assert f"{folder / 'pipe.tape'}: skipped, not a regular file" in skipped[0]
    assert f"{folder / 'secret.tape'}: skipped, it leads outside {folder}" in skipped[1]
    assert f"{folder / 'up.tape'}: skipped, it leads outside {folder}" in skipped[2]
    # The library, given the folder: the same files, the skips logged.
    with caplog.at_level(logging.WARNING, logger="streamtape.serve"), \
            ReplayServer(folder, profile="instant", log=lines.append) as server:
        assert [ix.request.path for ix in server.matcher.interactions] == ["/inside"]
    assert sum("skipped" in r.getMessage() for r in caplog.records) == 3


# --------------------------------------------------------------------------- 1,000 streams


STREAMS, HANG_UP_EVERY, PIECES = 1000, 20, 50


def _steady_tape(path: Path) -> list[int]:
    """One interaction of ``PIECES`` SSE events 20-40 ms apart (about 1.5 s); its offsets."""
    times = [20 * MS + i * 30 * MS + (i % 3 - 1) * 10 * MS for i in range(PIECES)]
    events = [b'data: {"i": %d, "pad": "%s"}\n\n' % (i, b"p" * 100) for i in range(PIECES)]
    streamtape.save(path, [interaction(events, times=times, url=f"http://upstream.test{PATH}")])
    return times


class _Sampler:
    """The server's descriptor count and RSS, sampled every 50 ms on a thread (their peaks)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fds = 0
        self.rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(OSError, ValueError):
                self.fds = max(self.fds, fd_count(self.pid))
                self.rss = max(self.rss, rss_kib(self.pid))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.slow
@pytest.mark.realtime
def _steady_fd_count(pid: int, quiet_s: float = 1.0, timeout: float = 20.0) -> int:
    """The process's open file count once it has not changed for ``quiet_s`` (or at ``timeout``)."""
    last, since = fd_count(pid), time.monotonic()
    deadline = since + timeout
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = fd_count(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


def test_1000_realtime_streams_with_5_percent_hanging_up_the_rest_complete_on_time_and_resources_return(
    tmp_path: Path,
) -> None:
    if not raise_fd_limit(2 * STREAMS + 500):
        pytest.skip(f"the descriptor limit is under {2 * STREAMS + 500}")
    tape = tmp_path / "steady.tape"
    times = _steady_tape(tape)
    body = b"".join(p.data for p in streamtape.load(tape)[0].response.pieces)  # type: ignore[union-attr]
    proc = serve_cli(str(tape))
    log = proc.out_lines  # the server's log lines, read as they come
    host, port = "127.0.0.1", proc.port
    hang_up = {i: 10 for i in range(0, STREAMS, HANG_UP_EVERY)}

    def round_() -> list:  # type: ignore[type-arg]
        return asyncio.run(fetch_many(host, port, [PATH] * STREAMS, stagger_s=1.0, hang_up=hang_up,
                                      timeout=60))

    def settled(fds: int) -> bool:
        return fd_count(proc.pid) <= fds

    try:
        round_()  # warm-up: imports, caches, the allocator's arenas
        wait_until(lambda: sum("outcome=" in x for x in log) >= STREAMS, 30)
        # A stream's outcome line comes before its connection is closed: the baseline is
        # taken once the warm-up's connections are gone (once it read 182 with them open,
        # and 9 after the measured round).
        fds0, rss0 = _steady_fd_count(proc.pid), rss_kib(proc.pid)
        sampler = _Sampler(proc.pid)
        got = round_()
        sampler.stop()
        wait_until(lambda: sum("outcome=" in x for x in log) >= 2 * STREAMS, 30)
        wait_until(lambda: settled(fds0), 10)
        fds1, rss1 = fd_count(proc.pid), rss_kib(proc.pid)
    finally:
        proc.stop(signal.SIGTERM, timeout=30)
    left = [f for i, f in enumerate(got) if i in hang_up]
    stayed = [f for i, f in enumerate(got) if i not in hang_up]
    assert [f.ending for f in left] == ["hung_up"] * len(left)
    assert [f.ending for f in stayed] == ["complete"] * len(stayed), {f.ending for f in stayed}
    assert all(f.body == body for f in stayed)  # no error reached another stream
    # On time: each piece's gap from the previous one, against the recorded gap.
    rec_gaps = [b - a for a, b in itertools.pairwise(times)]
    errors = sorted(abs((b[0] - a[0]) - g) / MS for f in stayed
                    for (a, b), g in zip(itertools.pairwise(f.pieces), rec_gaps, strict=True))
    p50, p99 = percentile(errors, 50), percentile(errors, 99)
    assert p50 is not None and p99 is not None
    ends = [(f.pieces[-1][0] - f.sent_ns - times[-1]) / MS for f in stayed]
    print(f"\n1000 streams: gap error p50 {p50:.2f} ms, p99 {p99:.2f} ms; last piece late by median "
          f"{statistics.median(ends):.1f} ms, max {max(ends):.1f} ms; fds {fds0} -> peak {sampler.fds} -> {fds1}; "
          f"RSS {rss0} -> peak {sampler.rss} -> {rss1} KiB; load {os.getloadavg()[0]:.2f}")
    # Generous bounds: the machine this runs on is shared, and one Python client times all
    # 1,000 streams (bench/reliability.py has the figures). They still catch a stream held
    # up by another's failure, or streams served one after another.
    # (Three suites at once on two cores gave p99 639 ms; streams served one after another
    # would be seconds late.)
    assert p50 < 50 and p99 < 1500
    # The last piece's lateness is mostly the one Python client's: beside a second test
    # suite on these 2 cores its median was 366-544 ms, beside two (a CI run and a suite)
    # 1,777 ms (quiet: tens of ms). Served one after another, 1,000 streams of 1.5 s would
    # be 25 minutes late: 5 s still catches that.
    assert statistics.median(ends) < 5000
    # Back where they were: every connection closed, and memory within 8 MiB of the start
    # (the request journal keeps a line per request: about 300 KiB for 1,000; beside other
    # work the second round ended 3.7-4.2 MiB above the first, the allocator keeping its
    # arenas, and 6.1 MiB once beside a second CI run; a connection's objects kept alive
    # would be 5 MiB and more on top of the 4).
    assert sampler.fds >= fds0 + STREAMS // 2  # the streams were open at once
    assert fds1 == fds0
    assert rss1 <= rss0 + 8 * 1024
    outcomes = [re.search(r"outcome=(\w+)", x).group(1) for x in log[STREAMS:] if "outcome=" in x]  # type: ignore[union-attr]
    assert sorted(set(outcomes)) == ["client_disconnected", "complete"]
    # The server logs a hang-up as such unless it had written the whole response first: a
    # client that lagged by the stream's length (beside a second suite, 3 of 50 once) read
    # the last chunk in the same read as the tenth, and for the server that stream was over.
    # One that hung up with the last piece or two unwritten may be either: the server sees a
    # closed socket at its second write after the hang-up.
    whole = sum(f.held_whole for f in left)
    near = sum(f.held_whole or f.held >= PIECES - 2 for f in left)
    assert len(hang_up) - near <= outcomes.count("client_disconnected") <= len(hang_up) - whole, (whole, near)
