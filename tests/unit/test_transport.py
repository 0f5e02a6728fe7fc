"""In-process replay: ReplayTransport / AsyncReplayTransport (httpx and httpx2) and ReplayAdapter.

Real clients (httpx, httpx2, requests) read through the transports, in this process; the
replay server on a real socket, the reference for what a fault looks like on a real
connection, is beside them in tests/system/test_transport.py.
"""

from __future__ import annotations

import gzip
import importlib
import itertools
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import httpx
import pytest
import requests

import streamtape
from streamtape import Interaction
from streamtape.cassette.model import Outcome
from streamtape.errors import NoMatchError, ProfileError
from streamtape.profiles import StepKind, parse_profile
from streamtape.transport import TIMEOUT, Action, head_failure, play_actions
from streamtape.wire import Framing
from tests.support.builders import MS
from tests.support.streams import BODY, EVENTS, URL, sse_ix

httpx2 = pytest.importorskip("httpx2", reason="needs httpx2, left out of the test extra on Python 3.11 (mitmproxy 11 pins h11 < 0.15, httpx2 needs 0.16)")

PACKAGES = [pytest.param(httpx, id="httpx"), pytest.param(httpx2, id="httpx2")]


def raw_pieces(pkg, transport, profile_header: str | None = None, timeout: float = 5.0) -> list[bytes]:
    headers = {"X-Streamtape-Profile": profile_header} if profile_header else {}
    with pkg.Client(transport=transport, timeout=timeout) as client, client.stream(
        "POST", URL, json=BODY, headers=headers
    ) as r:
        return list(r.iter_raw())


# --------------------------------------------------------------------------
# The pure part


def test_play_actions_times_out_when_a_silence_is_longer_than_the_read_timeout() -> None:
    sched = parse_profile("faithful").schedule(sse_ix(gap_ms=500))
    acts = list(play_actions(sched.steps, sched.head_at_ns, 200 * MS))
    assert [a.kind for a in acts] == [StepKind.SEND, TIMEOUT]
    assert acts[-1].at_ns == acts[0].at_ns + 200 * MS


def test_play_actions_without_timeout_plays_every_step_then_the_end() -> None:
    sched = parse_profile("faithful").schedule(sse_ix())
    acts = list(play_actions(sched.steps, sched.head_at_ns, None))
    assert [a.data for a in acts if a.kind is StepKind.SEND] == EVENTS
    assert acts[-1] == Action(sched.steps[-1].at_ns, StepKind.END)


def test_head_failure_is_a_timeout_when_the_head_is_due_after_the_read_timeout() -> None:
    sched = parse_profile("instant;fault=slow-headers:500").schedule(sse_ix())
    assert head_failure(sched, 200 * MS) == Action(200 * MS, TIMEOUT)
    assert head_failure(sched, None) is None


def test_head_failure_of_a_recording_without_a_head_is_the_server_hanging_up() -> None:
    headless = Interaction(sse_ix().request, None, outcome=Outcome.UPSTREAM_ERROR, end_ns=50 * MS)
    sched = parse_profile("faithful").schedule(headless)
    assert head_failure(sched, None) == Action(50 * MS, StepKind.CUT)
    assert head_failure(sched, 10 * MS) == Action(10 * MS, TIMEOUT)


# --------------------------------------------------------------------------
# httpx and httpx2, sync


@pytest.mark.parametrize("pkg", PACKAGES)
def test_faithful_replay_hands_over_exactly_the_recorded_pieces(pkg) -> None:
    t = streamtape.ReplayTransport([sse_ix()], realtime=False)
    assert raw_pieces(pkg, t) == EVENTS


@pytest.mark.parametrize("pkg", PACKAGES)
def test_a_profile_rechunks_the_stream_and_the_bytes_join_to_the_recording(pkg) -> None:
    t = streamtape.ReplayTransport([sse_ix()], "chunk=bytes:1;latency=instant")
    pieces = raw_pieces(pkg, t)
    assert all(len(p) == 1 for p in pieces)
    assert b"".join(pieces) == b"".join(EVENTS)


def test_one_transport_serves_httpx_and_httpx2_clients() -> None:
    t = streamtape.ReplayTransport([sse_ix(), sse_ix()], "instant")
    assert raw_pieces(httpx, t) == raw_pieces(httpx2, t) == EVENTS


@contextmanager
def imported_again(name: str) -> Iterator[ModuleType]:
    """``name`` imported a second time, as new module objects under the same names (what
    pytester's in-process runs do: each run drops the modules it imported, and the next
    run imports them again); the first import is back in ``sys.modules`` afterwards."""
    def own(m: str) -> bool:
        return m == name or m.startswith(name + ".")

    first = {m: mod for m, mod in sys.modules.items() if own(m)}
    for m in first:
        del sys.modules[m]
    try:
        yield importlib.import_module(name)
    finally:
        for m in [m for m in sys.modules if own(m)]:
            del sys.modules[m]
        sys.modules.update(first)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_a_package_imported_again_gets_streams_and_errors_of_its_own_classes(pkg) -> None:
    """The transport follows the package the client uses now, not the first one of that
    name it served: a client of ``httpx2`` imported again asserts that the stream is one of
    its own ``SyncByteStream`` and catches its own ``RemoteProtocolError``."""
    t = streamtape.ReplayTransport([sse_ix(), sse_ix(), sse_ix()], "instant")
    assert raw_pieces(pkg, t) == EVENTS
    with imported_again(pkg.__name__) as again:
        assert again is not pkg and again.SyncByteStream is not pkg.SyncByteStream
        assert raw_pieces(again, t) == EVENTS
        cut = streamtape.ReplayTransport([sse_ix()], "instant;fault=cut-event:2")
        with pytest.raises(again.RemoteProtocolError):
            raw_pieces(again, cut)
    assert raw_pieces(pkg, t) == EVENTS


def test_virtual_clock_replays_a_slow_recording_at_once() -> None:
    t = streamtape.ReplayTransport([sse_ix(gap_ms=3000)], realtime=False)
    t0 = time.perf_counter()
    assert raw_pieces(httpx2, t) == EVENTS
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.realtime
def test_realtime_replay_streams_lazily_at_the_recorded_times() -> None:
    """The first piece arrives long before the last is due: nothing is buffered whole."""
    t = streamtape.ReplayTransport([sse_ix(gap_ms=150)], "faithful", realtime=True)
    arrivals = []
    with httpx2.Client(transport=t) as c, c.stream("POST", URL, json=BODY) as r:
        t0 = time.perf_counter()
        for piece in r.iter_raw():
            arrivals.append((time.perf_counter() - t0, piece))
    assert [p for _, p in arrivals] == EVENTS
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(arrivals)]
    for g in gaps:
        assert 0.12 <= g <= 0.4, gaps
    assert arrivals[0][0] < 0.1


@pytest.mark.parametrize("pkg", PACKAGES)
def test_a_cut_raises_the_clients_own_remote_protocol_error_after_the_pieces_before_it(pkg) -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant;fault=cut-event:2")
    got = []
    with pkg.Client(transport=t) as c, c.stream("POST", URL, json=BODY) as r, pytest.raises(
        pkg.RemoteProtocolError, match="incomplete chunked read"
    ):
        got.extend(r.iter_raw())
    assert b"".join(got) == b"".join(EVENTS[:2])


@pytest.mark.parametrize("pkg", PACKAGES)
def test_a_cut_on_content_length_framing_says_how_much_was_missing(pkg) -> None:
    ix = sse_ix(framing="content-length")
    t = streamtape.ReplayTransport([ix], "instant;fault=cut:10B")
    with pkg.Client(transport=t) as c, pytest.raises(pkg.RemoteProtocolError, match=r"received 10 bytes, expected"):
        c.post(URL, json=BODY)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_a_cut_on_a_close_delimited_body_looks_like_the_end_as_on_a_socket(pkg) -> None:
    t = streamtape.ReplayTransport([sse_ix(framing="close-delimited")], "instant;fault=cut-event:2")
    assert b"".join(raw_pieces(pkg, t)) == b"".join(EVENTS[:2])


@pytest.mark.parametrize("pkg", PACKAGES)
def test_a_reset_raises_read_error(pkg) -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant;fault=reset:50%")
    with pytest.raises(pkg.ReadError, match="reset"):
        raw_pieces(pkg, t)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_a_stall_longer_than_the_read_timeout_is_read_timeout_on_the_virtual_clock(pkg) -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant;fault=stall:3:30", realtime=False)
    t0 = time.perf_counter()
    with pytest.raises(pkg.ReadTimeout):
        raw_pieces(pkg, t, timeout=10)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("pkg", PACKAGES)
def test_a_stall_shorter_than_the_read_timeout_is_just_a_pause(pkg) -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant;fault=stall:3:5", realtime=False)
    assert raw_pieces(pkg, t, timeout=10) == EVENTS


def test_keepalive_comments_keep_a_stalled_stream_under_the_read_timeout() -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant;fault=stall:3:30;fault=keepalive:4", realtime=False)
    pieces = raw_pieces(httpx2, t, timeout=5)
    assert b": keepalive" in b"".join(pieces)


@pytest.mark.realtime
def test_realtime_stall_raises_read_timeout_when_the_timeout_expires() -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant;fault=stall:2:5", realtime=True)
    t0 = time.perf_counter()
    with pytest.raises(httpx2.ReadTimeout):
        raw_pieces(httpx2, t, timeout=0.3)
    assert 0.25 <= time.perf_counter() - t0 <= 2.0


@pytest.mark.parametrize("pkg", PACKAGES)
def test_slow_headers_past_the_read_timeout_fail_before_the_response(pkg) -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant;fault=slow-headers:5000", realtime=False)
    with pkg.Client(transport=t, timeout=1) as c, pytest.raises(pkg.ReadTimeout):
        c.post(URL, json=BODY)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_a_status_fault_is_an_error_response_in_the_formats_shape(pkg) -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant;fault=status:429")
    with pkg.Client(transport=t) as c:
        r = c.post(URL, json=BODY)
    assert r.status_code == 429
    assert r.headers["retry-after"]
    assert "error" in r.json()


def test_an_http2_recording_replays_with_chunked_semantics() -> None:
    """HTTP/2 (framing "frames") has a visible end of stream: a cut is an error, not an end."""
    import dataclasses

    ix = sse_ix()
    assert ix.response is not None
    h2 = dataclasses.replace(
        ix,
        response=dataclasses.replace(
            ix.response, framing=Framing.FRAMES, http_version="HTTP/2.0", headers=(("content-type", "text/event-stream"),)
        ),
    )
    assert raw_pieces(httpx2, streamtape.ReplayTransport([h2], "instant")) == EVENTS
    with pytest.raises(httpx2.RemoteProtocolError):
        raw_pieces(httpx2, streamtape.ReplayTransport([h2], "instant;fault=cut-event:1"))


def test_a_recording_without_a_response_head_replays_as_a_server_disconnect() -> None:
    ix = Interaction(sse_ix().request, None, outcome=Outcome.UPSTREAM_ERROR, error="connection refused", end_ns=MS)
    t = streamtape.ReplayTransport([ix], "instant")
    with httpx2.Client(transport=t) as c, pytest.raises(httpx2.RemoteProtocolError, match="without sending a response"):
        c.post(URL, json=BODY)


def test_gzip_bodies_are_played_as_recorded_and_decoded_by_the_client() -> None:
    text = b"".join(EVENTS)
    gz = gzip.compress(text)
    ix = sse_ix([gz[:20], gz[20:]], headers=(("Content-Encoding", "gzip"),))
    t = streamtape.ReplayTransport([ix], "chunk=bytes:7;latency=instant")
    with httpx2.Client(transport=t) as c, c.stream("POST", URL, json=BODY) as r:
        assert b"".join(r.iter_raw()) == gz
    with httpx2.Client(transport=t) as c:
        assert c.post(URL, json=BODY).content == text


def test_the_profile_header_overrides_the_profile_for_one_request() -> None:
    t = streamtape.ReplayTransport([sse_ix()], "faithful", realtime=False)
    assert raw_pieces(httpx2, t) == EVENTS
    assert all(len(p) == 1 for p in raw_pieces(httpx2, t, profile_header="chunk=bytes:1;latency=instant"))


def test_a_parsed_profile_is_accepted_too() -> None:
    t = streamtape.ReplayTransport([sse_ix()], parse_profile("chunk=whole;latency=instant"))
    assert raw_pieces(httpx2, t) == [b"".join(EVENTS)]


def test_a_bad_profile_is_one_clear_error() -> None:
    with pytest.raises(ProfileError, match="chunk=nope"):
        streamtape.ReplayTransport([sse_ix()], "chunk=nope")


def test_an_unmatched_request_gets_an_openai_shaped_422_naming_the_closest_recording() -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant")
    with httpx2.Client(transport=t) as c:
        r = c.post(URL, json={**BODY, "model": "other"})
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["type"] == "streamtape_no_match"
    assert "model" in err["message"]
    assert t.received[-1]["matched"] is None


def test_no_match_raise_raises_no_match_error() -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant", no_match="raise")
    with httpx2.Client(transport=t) as c, pytest.raises(NoMatchError, match="closest"):
        c.post(URL.replace("chat", "x"), json=BODY)


def test_a_bad_header_profile_is_a_400_naming_the_item_or_raises_on_request() -> None:
    t = streamtape.ReplayTransport([sse_ix()], "instant")
    with httpx2.Client(transport=t) as c:
        r = c.post(URL, json=BODY, headers={"X-Streamtape-Profile": "fault=stall:9:1"})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "streamtape_bad_profile"
    assert "stall:9:1" in r.json()["error"]["message"]
    t = streamtape.ReplayTransport([sse_ix()], "instant", no_match="raise")
    with httpx2.Client(transport=t) as c, pytest.raises(ProfileError, match="latency=sideways"):
        c.post(URL, json=BODY, headers={"X-Streamtape-Profile": "latency=sideways"})


def test_the_cassette_can_be_a_path_a_folder_or_a_loaded_cassette(tmp_path: Path) -> None:
    path = tmp_path / "one.tape"
    streamtape.save(path, [sse_ix()])
    for source in (path, str(path), tmp_path, streamtape.load(path)):
        t = streamtape.ReplayTransport(source, "instant")
        assert raw_pieces(httpx2, t) == EVENTS


# --------------------------------------------------------------------------
# async


@pytest.mark.parametrize("pkg", PACKAGES)
async def test_async_transport_streams_the_recorded_pieces(pkg) -> None:
    t = streamtape.AsyncReplayTransport([sse_ix()], realtime=False)
    async with pkg.AsyncClient(transport=t) as c, c.stream("POST", URL, json=BODY) as r:
        assert [p async for p in r.aiter_raw()] == EVENTS


@pytest.mark.parametrize("pkg", PACKAGES)
async def test_async_cut_reset_and_timeout_raise_as_on_a_real_connection(pkg) -> None:
    for profile, exc in [
        ("instant;fault=cut:50%", pkg.RemoteProtocolError),
        ("instant;fault=reset:50%", pkg.ReadError),
        ("instant;fault=stall:2:60", pkg.ReadTimeout),
    ]:
        t = streamtape.AsyncReplayTransport([sse_ix()], profile, realtime=False)
        async with pkg.AsyncClient(transport=t, timeout=5) as c:
            with pytest.raises(exc):
                async with c.stream("POST", URL, json=BODY) as r:
                    async for _ in r.aiter_raw():
                        pass


@pytest.mark.realtime
async def test_async_realtime_streams_do_not_block_each_other() -> None:
    """Ten concurrent realtime replays take about one stream's time, not ten."""
    import asyncio

    t = streamtape.AsyncReplayTransport([sse_ix(gap_ms=100)], "faithful", realtime=True)

    async def one() -> bytes:
        async with httpx2.AsyncClient(transport=t) as c, c.stream("POST", URL, json=BODY) as r:
            return b"".join([p async for p in r.aiter_raw()])

    t0 = time.perf_counter()
    bodies = await asyncio.gather(*(one() for _ in range(10)))
    took = time.perf_counter() - t0
    assert bodies == [b"".join(EVENTS)] * 10
    assert 0.3 <= took <= 1.5


# --------------------------------------------------------------------------
# requests


def session(ix: Interaction | list[Interaction], profile: str = "instant", **kw) -> requests.Session:
    s = requests.Session()
    s.mount("http://", streamtape.ReplayAdapter(ix if isinstance(ix, list) else [ix], profile, **kw))
    return s


def test_adapter_is_an_http_adapter() -> None:
    assert isinstance(streamtape.ReplayAdapter([sse_ix()]), requests.adapters.HTTPAdapter)


def test_adapter_iter_content_yields_one_item_per_recorded_piece() -> None:
    with session(sse_ix(), realtime=False) as s:
        r = s.post(URL, json=BODY, stream=True)
        assert r.status_code == 200
        assert list(r.iter_content(chunk_size=None)) == EVENTS


@pytest.mark.realtime
def test_adapter_streams_each_piece_at_its_recorded_time() -> None:
    with session(sse_ix(gap_ms=150), "faithful") as s:
        r = s.post(URL, json=BODY, stream=True)
        t0 = time.perf_counter()
        arrivals = [(time.perf_counter() - t0, p) for p in r.iter_content(chunk_size=None)]
    assert [p for _, p in arrivals] == EVENTS
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(arrivals)]
    assert all(0.12 <= g <= 0.4 for g in gaps), gaps


def test_adapter_iter_lines_reassembles_lines_split_across_pieces() -> None:
    with session(sse_ix(), "chunk=bytes:3;latency=instant") as s:
        r = s.post(URL, json=BODY, stream=True)
        lines = [ln for ln in r.iter_lines() if ln]
    assert lines == [e.strip() for e in EVENTS]


def test_adapter_without_stream_reads_the_whole_body() -> None:
    with session(sse_ix()) as s:
        assert s.post(URL, json=BODY).content == b"".join(EVENTS)


def test_adapter_slow_headers_past_the_timeout_is_read_timeout() -> None:
    with session(sse_ix(), "instant;fault=slow-headers:3000", realtime=False) as s, pytest.raises(
        requests.exceptions.ReadTimeout
    ):
        s.post(URL, json=BODY, timeout=1)


def test_adapter_no_match_is_a_422_with_the_closest_recording() -> None:
    with session(sse_ix()) as s:
        r = s.post(URL, json={**BODY, "stream": False})
    assert r.status_code == 422
    assert r.json()["error"]["type"] == "streamtape_no_match"


def test_adapter_close_delimited_body_ends_at_the_close() -> None:
    with session(sse_ix(framing="close-delimited")) as s:
        r = s.post(URL, json=BODY, stream=True)
        assert b"".join(r.iter_content(chunk_size=None)) == b"".join(EVENTS)
