"""The AWS event stream decoder: messages under any split, every header type, and what
it reports (a CRC that does not match, a prelude it cannot trust, a cut message)."""

from __future__ import annotations

import random
import struct
import uuid
from binascii import crc32

import pytest

from streamtape.check import check
from streamtape.shapes import analyze, event_spans
from streamtape.shapes.eventstream import (
    EventStreamBreak,
    EventStreamDecoder,
    EventStreamMessage,
    decode,
    encode_message,
    event_message,
    exception_message,
)
from tests.support.hosted import CONVERSE_PATH, EVENTSTREAM, converse_messages, ix


def _laid_out(headers: bytes, payload: bytes) -> bytes:
    """A message laid out byte by byte as the format's description says."""
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(headers))
    prelude += struct.pack("!I", crc32(prelude))
    body = prelude + headers + payload
    return body + struct.pack("!I", crc32(body))


def _splits(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, 40)
        out.append(data[i : i + n])
        i += n
    return out


def test_the_encoder_lays_out_prelude_headers_payload_and_both_crcs_as_the_format_says():
    headers = b"\x0b:event-type\x07\x00\x05chunk"
    assert encode_message(((":event-type", "chunk"),), b'{"a":1}') == _laid_out(headers, b'{"a":1}')


@pytest.mark.parametrize("seed", range(6))
def test_messages_come_back_whole_with_their_byte_ranges_under_any_split(seed):
    msgs = converse_messages(tool=True)
    body = b"".join(msgs)
    pieces = [body[i : i + 1] for i in range(len(body))] if seed == 0 else _splits(body, seed)
    items = decode(pieces)
    assert all(isinstance(m, EventStreamMessage) and m.crc_ok for m in items)
    assert [body[m.start : m.end] for m in items if isinstance(m, EventStreamMessage)] == msgs
    first = items[0]
    assert isinstance(first, EventStreamMessage)
    assert (first.event_type, first.message_type, first.header(":content-type")) == (
        "messageStart", "event", "application/json")


def test_every_header_type_is_read():
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    headers = (
        b"\x01t\x00" + b"\x01f\x01" + b"\x01b\x02\xff" + b"\x01s\x03" + struct.pack("!h", -300)
        + b"\x01i\x04" + struct.pack("!i", 70000) + b"\x01l\x05" + struct.pack("!q", 2**40)
        + b"\x01y\x06" + struct.pack("!H", 3) + b"\x00\x01\x02"
        + b"\x01w\x07" + struct.pack("!H", 5) + "wörd".encode()
        + b"\x01d\x08" + struct.pack("!q", 1_700_000_000_000) + b"\x01u\x09" + u.bytes
    )
    (m,) = decode([_laid_out(headers, b"")])
    assert isinstance(m, EventStreamMessage)
    assert dict(m.headers) == {"t": True, "f": False, "b": -1, "s": -300, "i": 70000, "l": 2**40,
                               "y": b"\x00\x01\x02", "w": "wörd", "d": 1_700_000_000_000,
                               "u": str(u)}


def test_a_message_whose_crc_does_not_match_is_reported_and_decoding_goes_on():
    a, b = event_message("messageStart", {"role": "assistant"}), exception_message("x", "y")
    bad = bytearray(a)
    bad[-6] ^= 0x20  # a payload byte: the message CRC no longer matches
    items = decode([bytes(bad) + b])
    assert [(type(m).__name__, getattr(m, "crc_ok", None)) for m in items] == [
        ("EventStreamMessage", False), ("EventStreamMessage", True)]


def test_a_prelude_that_cannot_be_trusted_stops_decoding_and_keeps_the_rest_pending():
    a, b = event_message("messageStart", {}), event_message("messageStop", {})
    bad = bytearray(b)
    bad[1] ^= 0x01  # the total length: the prelude CRC no longer matches
    d = EventStreamDecoder()
    items = d.feed(a + bytes(bad))
    assert isinstance(items[-1], EventStreamBreak) and "prelude CRC32" in items[-1].reason
    assert items[-1].start == len(a) and d.pending == bytes(bad)
    assert d.feed(b) == [] and d.pending.endswith(b)


def test_an_impossible_length_with_a_sound_prelude_crc_is_a_break():
    prelude = struct.pack("!II", 8, 0)
    items = decode([prelude + struct.pack("!I", crc32(prelude)) + b"\0" * 8])
    assert isinstance(items[0], EventStreamBreak) and "impossible" in items[0].reason


def test_a_message_cut_short_is_pending_and_not_dispatched():
    m = event_message("contentBlockDelta", {"delta": {"text": "hi"}})
    d = EventStreamDecoder()
    assert d.feed(m[:-5]) == [] and d.pending == m[:-5]
    assert len(d.feed(m[-5:])) == 1 and d.pending == b""


def test_botocore_reads_what_the_encoder_writes():
    boto = pytest.importorskip("botocore.eventstream")
    buf = boto.EventStreamBuffer()
    buf.add_data(event_message("contentBlockDelta", {"delta": {"text": "wörld"}})
                 + exception_message("throttlingException", "slow down"))
    got = [(m.headers, m.payload) for m in buf]
    assert got == [
        ({":event-type": "contentBlockDelta", ":content-type": "application/json",
          ":message-type": "event"}, '{"delta":{"text":"wörld"}}'.encode()),
        ({":exception-type": "throttlingException", ":content-type": "application/json",
          ":message-type": "exception"}, b'{"message":"slow down"}'),
    ]


def test_check_reports_a_crc_mismatch_at_the_message_it_concerns():
    msgs = converse_messages()
    bad = bytearray(msgs[2])
    bad[-6] ^= 0x01
    msgs[2] = bytes(bad)
    findings = check(ix(msgs, CONVERSE_PATH, EVENTSTREAM))
    crc = [f for f in findings if f.code == "crc-mismatch"]
    assert len(crc) == 1 and crc[0].event == 2 and "CRC32" in crc[0].message


def test_a_stream_broken_mid_way_is_a_frame_finding_and_a_cut_event():
    msgs = converse_messages()
    body = b"".join(msgs[:3]) + b"\x00\x00\x00\x08garbage-bytes-here"
    a = analyze(ix([body], CONVERSE_PATH, EVENTSTREAM))
    assert a.shape == "bedrock-converse" and len(a.wire_events) == 3
    codes = {f.code for f in check(ix([body], CONVERSE_PATH, EVENTSTREAM))}
    assert {"crc-mismatch", "cut-event", "no-done"} <= codes


def test_event_spans_of_an_event_stream_are_its_messages():
    msgs = converse_messages()
    body = b"".join(msgs)
    spans = event_spans(body + msgs[0][:10], "eventstream")
    assert [body[s.start : s.end] for s in spans] == msgs
