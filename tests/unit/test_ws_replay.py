"""WebSocket replay without a socket: the schedule of a recorded Realtime session under every
message profile and fault (when each server message is due, after which client message, how
it is framed, how the session ends), and the in-process transports' answer to a session. The
replay server keeping that schedule for real clients is tests/system/test_ws_replay.py."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest
from wsproto import ConnectionType
from wsproto.connection import Connection
from wsproto.events import TextMessage

import streamtape
from streamtape.cassette.model import Direction
from streamtape.errors import ProfileError
from streamtape.profiles import parse_profile
from streamtape.profiles.websocket import SessionStepKind, schedule_session
from streamtape.serve.websocket import encode_message
from tests.support.builders import MS, chat_ix
from tests.support.realtime_session import (
    CLIENT_EVENTS,
    MESSAGES,
    N_SERVER,
    PATH,
    SERVER_TYPES,
    session_ix,
)


def test_server_messages_are_timed_from_the_client_message_before_them() -> None:
    sched = schedule_session(parse_profile("faithful"), session_ix())
    sends = sched.sends
    assert [json.loads(s.data)["type"] for s in sends] == SERVER_TYPES
    assert sched.head_at_ns == 40 * MS
    # (anchor, delay): session.created from the upgrade; each answer from its question.
    assert [(s.after, s.delay_ns // MS) for s in sends[:4]] == [(0, 45), (1, 15), (2, 15), (3, 40)]
    assert [s.delay_ns // MS for s in sends if s.after == 3] == [40, 50, 80, 100, 120, 140, 160, 170, 180]
    assert [json.loads(m.data)["type"] for m in sched.expected] == [e["type"] for e in CLIENT_EVENTS]
    assert sched.ending.kind is SessionStepKind.AWAIT_CLOSE and sched.ending.after == 3


@pytest.mark.parametrize(
    ("close", "kind"),
    [
        ((1000, "", Direction.CLIENT), SessionStepKind.AWAIT_CLOSE),
        ((1011, "upstream overloaded", Direction.SERVER), SessionStepKind.CLOSE),
        ((None, "", None), SessionStepKind.DROP),
    ],
    ids=["client-closed", "server-closed", "dropped"],
)
def test_the_schedule_ends_as_the_recording_did(
    close: tuple[int | None, str, Direction | None], kind: SessionStepKind
) -> None:
    ending = schedule_session(parse_profile("faithful"), session_ix(close=close)).ending
    assert ending.kind is kind
    if kind is SessionStepKind.CLOSE:
        assert (ending.code, ending.reason) == (1011, "upstream overloaded")
        assert ending.delay_ns == (305 - 100) * MS  # the recorded end, from response.create


def test_latency_profiles_act_on_every_delay_and_never_reorder() -> None:
    ix = session_ix()
    faithful = [s.delay_ns for s in schedule_session(parse_profile("faithful"), ix).sends]
    half = schedule_session(parse_profile("latency=scale:0.5"), ix)
    assert [s.delay_ns for s in half.sends] == [round(d * 0.5) for d in faithful]
    assert half.head_at_ns == 20 * MS
    instant = schedule_session(parse_profile("instant"), ix)
    assert {s.delay_ns for s in instant.steps} == {0} and instant.head_at_ns == 0
    jitter = schedule_session(parse_profile("latency=jitter:30;seed=7"), ix)
    again = schedule_session(parse_profile("latency=jitter:30;seed=7"), ix)
    assert jitter == again  # seeded
    assert jitter != schedule_session(parse_profile("latency=jitter:30;seed=8"), ix)
    jittered = [s.delay_ns for s in jitter.sends]
    assert all(got >= rec for rec, got in zip(faithful, jittered, strict=True))
    assert jittered != faithful
    for anchor in range(4):
        delays = [s.delay_ns for s in jitter.sends if s.after == anchor]
        assert delays == sorted(delays)
    fixed = schedule_session(parse_profile("latency=fixed:5:2"), ix)
    assert [s.delay_ns // MS for s in fixed.sends if s.after == 3] == [5, 7, 9, 11, 13, 15, 17, 19, 21]


def test_fragment_sends_each_message_in_frames_of_n_bytes() -> None:
    sched = schedule_session(parse_profile("chunk=fragment:4"), session_ix())
    for s in sched.sends:
        assert sum(s.frames) == len(s.data) and all(n == 4 for n in s.frames[:-1])
    # Recorded frames are kept under 'recorded'; unknown frames are one frame.
    framed = replace(MESSAGES[0], fragments=(10, len(MESSAGES[0].data) - 10))
    rec = schedule_session(parse_profile("faithful"), session_ix((framed, *MESSAGES[1:])))
    assert rec.sends[0].frames == framed.fragments and rec.sends[1].frames == ()


def test_a_fragmented_text_message_is_split_inside_a_utf8_character_and_reassembles() -> None:
    delta = next(s for s in schedule_session(parse_profile("chunk=fragment:1"), session_ix()).sends
                 if b"\xc3\xbc" in s.data)  # "ü"
    conn = Connection(ConnectionType.CLIENT)  # the frame layer of a client, past its handshake
    conn.receive_data(encode_message(delta))
    parts = [e for e in conn.events() if isinstance(e, TextMessage)]
    assert len(parts) == len(delta.data)  # one frame per byte, the text still valid as a whole
    assert "".join(p.data for p in parts) == delta.data.decode()
    assert parts[-1].message_finished and not parts[0].message_finished


def test_coalesce_groups_the_messages_between_client_messages_at_the_last_ones_time() -> None:
    sched = schedule_session(parse_profile("chunk=coalesce"), session_ix())
    answer = [s for s in sched.sends if s.after == 3]
    assert {s.delay_ns for s in answer} == {180 * MS}  # response.done's recorded delay
    assert len({s.group for s in answer}) == 1
    windowed = schedule_session(parse_profile("chunk=coalesce:25"), session_ix())
    groups = [s.group for s in windowed.sends if s.after == 3]
    assert len(set(groups)) > 1 and groups == sorted(groups)


def test_close_and_drop_faults_end_the_session_after_server_message_n() -> None:
    ix = session_ix()
    sched = schedule_session(parse_profile("fault=close:6:1011"), ix)
    assert len(sched.sends) == 6 and sched.faulted
    ending = sched.ending
    assert (ending.kind, ending.code, ending.after) == (SessionStepKind.CLOSE, 1011, 3)
    assert ending.delay_ns == sched.sends[-1].delay_ns and "close:6:1011" in ending.reason
    drop = schedule_session(parse_profile("fault=close:6:1000;fault=drop:2"), ix)
    assert len(drop.sends) == 2 and drop.ending.kind is SessionStepKind.DROP
    first = schedule_session(parse_profile("fault=close:0:4000"), ix)
    assert first.sends == () and first.ending.after == 0 and first.ending.delay_ns == 40 * MS
    with pytest.raises(ProfileError, match=rf"close:99:1011.*only {N_SERVER} server messages"):
        schedule_session(parse_profile("fault=close:99:1011"), ix)
    assert schedule_session(parse_profile("fault=ping:0.5"), ix).ping_every_ns == 500 * MS


def test_slow_headers_delays_the_101_and_what_is_timed_from_the_upgrade() -> None:
    ix = session_ix()
    plain = schedule_session(parse_profile("faithful"), ix)
    slow = schedule_session(parse_profile("fault=slow-headers:100"), ix)
    assert slow.head_at_ns == plain.head_at_ns + 100 * MS
    for a, b in zip(plain.sends, slow.sends, strict=True):
        assert b.delay_ns - a.delay_ns == (100 * MS if a.after == 0 else 0)


@pytest.mark.parametrize(
    "bad", ["fault=close:2:1005", "fault=close:2:2000", "fault=close:2", "fault=ping:0", "chunk=fragment:0"]
)
def test_malformed_websocket_items_are_profile_errors(bad: str) -> None:
    with pytest.raises(ProfileError, match="bad item"):
        parse_profile(bad)


def test_http_schedules_ignore_the_websocket_items() -> None:
    ix = chat_ix(5)
    plain = parse_profile("latency=instant").schedule(ix)
    mixed = parse_profile("latency=instant;chunk=fragment:3;fault=close:2:1011;fault=drop:1;fault=ping:1")
    assert mixed.schedule(ix).steps == plain.steps


def test_an_in_process_transport_answers_a_session_with_426_naming_the_server_way_in() -> None:
    with httpx.Client(transport=streamtape.ReplayTransport([session_ix()]), base_url="http://x") as client:
        r = client.get(PATH)
    assert r.status_code == 426
    assert "WebSocket session" in r.json()["error"]["message"]
    assert "ws_url" in r.json()["error"]["message"]


def test_an_in_process_transport_raises_session_error_when_asked_to_raise() -> None:
    transport = streamtape.ReplayTransport([session_ix()], no_match="raise")
    with httpx.Client(transport=transport, base_url="http://x") as client, pytest.raises(streamtape.SessionError) as e:
        client.get(PATH)
    assert e.value.index == 0
