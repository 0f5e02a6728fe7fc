"""The content-aware profiles on the hosted providers' wires: one event-stream message or
JSON array element per piece, UTF-8 cuts inside event-stream payloads (the messages and
their CRCs as recorded), faults at event N, and a Bedrock stream ending in an exception."""

from __future__ import annotations

import json

import pytest

from streamtape.errors import ProfileError
from streamtape.profiles import StepKind, parse_profile
from streamtape.shapes import analyze
from streamtape.shapes.eventstream import EventStreamMessage, decode
from tests.support.builders import MS, interaction
from tests.support.hosted import (
    CONVERSE_PATH,
    EVENTSTREAM,
    GEMINI_PATH,
    JSON,
    SSE,
    converse_messages,
    gemini_array,
    gemini_chunks,
    gemini_sse,
    ix,
)


def _sent(profile: str, x) -> tuple[list[bytes], StepKind]:
    s = parse_profile(profile).schedule(x)
    return [st.data for st in s.steps if st.data], s.steps[-1].kind


def _replayed(pieces: list[bytes], like):
    """The pieces a schedule sent, as an interaction of the same request and head."""
    return interaction(pieces, first_ns=MS, gap_ns=MS, head_ns=0, status=200, reason="",
                       content_type=like.response.content_type, framing_header=False,
                       url=like.request.url, request_headers=(), body={})


def test_chunk_events_sends_one_event_stream_message_per_piece():
    msgs = converse_messages(tool=True)
    sent, end = _sent("chunk=events", ix([b"".join(msgs)], CONVERSE_PATH, EVENTSTREAM))
    assert sent == msgs and end is StepKind.END


def test_chunk_events_sends_one_json_array_element_per_piece():
    pieces = gemini_array(gemini_chunks())
    sent, _ = _sent("chunk=events", ix([b"".join(pieces)], GEMINI_PATH, JSON))
    assert sent == pieces
    assert json.loads(b"".join(sent))  # still the one array


def test_utf8_split_cuts_characters_inside_event_stream_payloads_only():
    msgs = converse_messages()
    x = ix(msgs, CONVERSE_PATH, EVENTSTREAM)
    sent, _ = _sent("chunk=utf8-split", x)
    body = b"".join(msgs)
    assert b"".join(sent) == body and len(sent) > len(msgs)
    ranges = [(m.end - 4 - len(m.payload), m.end - 4) for m in decode([body])
              if isinstance(m, EventStreamMessage)]
    cuts = set()
    pos = 0
    for p in sent[:-1]:
        pos += len(p)
        cuts.add(pos)
    recorded = set()
    pos = 0
    for m in msgs[:-1]:
        pos += len(m)
        recorded.add(pos)
    added = cuts - recorded
    assert added and all(any(a < c < b for a, b in ranges) for c in added)
    assert all(0x80 <= body[c] <= 0xBF for c in added)  # each inside a character
    assert all(m.crc_ok for m in decode(sent) if isinstance(m, EventStreamMessage))
    replayed = analyze(_replayed(sent, x))
    assert replayed.text == analyze(x).text
    assert (analyze(x).cut_chars, replayed.cut_chars) == (0, len(added))


def test_a_bedrock_stream_can_end_in_a_replayed_exception_message_at_event_n():
    x = ix(converse_messages(), CONVERSE_PATH, EVENTSTREAM)
    sent, end = _sent("fault=exception:3:throttlingException", x)
    items = decode(sent)
    assert [m.event_type for m in items if isinstance(m, EventStreamMessage)] == [
        "messageStart", "contentBlockDelta", "contentBlockDelta", "throttlingException"]
    last = items[-1]
    assert isinstance(last, EventStreamMessage) and last.message_type == "exception" and last.crc_ok
    assert end is StepKind.END
    a = analyze(_replayed(sent, x))
    assert a.errors[0].error == {"type": "throttlingException",
                                 "message": "streamtape fault: throttlingException injected"}


def test_error_event_on_a_bedrock_stream_is_a_model_stream_error_exception():
    x = ix(converse_messages(), CONVERSE_PATH, EVENTSTREAM)
    sent, _ = _sent("fault=error-event:1", x)
    assert [getattr(m, "event_type", None) for m in decode(sent)] == [
        "messageStart", "modelStreamErrorException"]


def test_the_exception_fault_needs_an_event_stream():
    x = ix(gemini_sse(gemini_chunks()), GEMINI_PATH, SSE)
    with pytest.raises(ProfileError, match="needs an AWS event stream"):
        parse_profile("fault=exception:1:throttlingException").schedule(x)


@pytest.mark.parametrize("text", ["fault=exception:1", "fault=exception:1:", "fault=exception:x:y",
                                  "fault=exception:1:not a type"])
def test_a_malformed_exception_fault_is_a_profile_error(text):
    with pytest.raises(ProfileError):
        parse_profile(text)


@pytest.mark.parametrize("n", [0, 2])
def test_error_event_on_a_gemini_array_keeps_it_one_valid_array(n):
    x = ix(gemini_array(gemini_chunks()), GEMINI_PATH, JSON)
    sent, _ = _sent(f"fault=error-event:{n}", x)
    doc = json.loads(b"".join(sent))
    assert len(doc) == n + 1 and doc[-1]["error"]["status"] == "INTERNAL"
    assert analyze(_replayed(sent, x)).errors


def test_cut_event_on_a_gemini_array_cuts_after_element_n():
    pieces = gemini_array(gemini_chunks())
    sent, end = _sent("fault=cut-event:2", ix(pieces, GEMINI_PATH, JSON))
    assert b"".join(sent) == b"".join(pieces[:2]) and end is StepKind.CUT


def test_drop_done_on_a_gemini_array_leaves_out_the_closing_bracket():
    pieces = gemini_array(gemini_chunks())
    sent, _ = _sent("fault=drop-done", ix(pieces, GEMINI_PATH, JSON))
    assert b"".join(sent) == b"".join(pieces[:-1])


def test_newline_leaves_an_event_stream_as_recorded():
    msgs = converse_messages()
    sent, _ = _sent("newline=crlf;chunk=whole", ix(msgs, CONVERSE_PATH, EVENTSTREAM))
    assert sent == [b"".join(msgs)]


def test_botocore_raises_the_replayed_exception_after_the_events_before_it():
    boto3 = pytest.importorskip("boto3")
    from botocore.eventstream import EventStream  # type: ignore[import-untyped]
    from botocore.exceptions import EventStreamError  # type: ignore[import-untyped]
    from botocore.parsers import EventStreamJSONParser  # type: ignore[import-untyped]

    x = ix(converse_messages(), CONVERSE_PATH, EVENTSTREAM)
    sent, _ = _sent("fault=exception:3:throttlingException", x)

    class Body:
        def stream(self):
            yield from sent

        def close(self) -> None:
            pass

    client = boto3.client("bedrock-runtime", region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="y")
    shape = client.meta.service_model.operation_model("ConverseStream").output_shape
    stream = EventStream(Body(), shape.members["stream"], EventStreamJSONParser(), "ConverseStream")
    seen = []
    with pytest.raises(EventStreamError, match="throttlingException"):
        for ev in stream:
            seen.extend(ev)
    assert seen == ["messageStart", "contentBlockDelta", "contentBlockDelta"]
