"""A client that hangs up once the stream has reached its end marker: one rule
(:func:`streamtape.check.left_after_end`) for ``check``, a two-file ``diff`` and a shadow
session's comparison, on built interactions. The same streams recorded through
``streamtape record`` in front of the real openai SDK are tests/system/test_left_after_end.py."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from streamtape import Interaction
from streamtape.cassette.model import Outcome
from streamtape.check import CLIENT_LEFT, check, left_after_end
from streamtape.diff import Status, compare, diff_many, render_text, report_json
from streamtape.diff.shadow import diff_shadow, primary_for_comparison
from streamtape.diff.summary import short_reason
from streamtape.shapes import analyze
from tests.support.builders import chat_events, interaction, sse

LEFT = "Client disconnected."
WHOLE = chat_events(["Hel", "lo"])
"""role, two words, the finish, ``[DONE]``."""


def openai(pieces: list[bytes] = WHOLE, outcome: Outcome = Outcome.COMPLETE, **kw: object) -> Interaction:
    error = LEFT if outcome is Outcome.CLIENT_DISCONNECTED else None
    return interaction(pieces, outcome=outcome, error=error, **kw)  # type: ignore[arg-type]


def left(pieces: list[bytes] = WHOLE, **kw: object) -> Interaction:
    return openai(pieces, Outcome.CLIENT_DISCONNECTED, **kw)


ANTHROPIC = [
    sse({"type": "message_start", "message": {"id": "m", "role": "assistant", "content": []}}, "message_start"),
    sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        "content_block_start"),
    sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        "content_block_delta"),
    sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
    sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        "message_delta"),
    sse({"type": "message_stop"}, "message_stop"),
]

MCP_CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1}}}
MCP_PROGRESS = sse({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": 7, "progress": 1}}, "message")
MCP_ANSWER = sse({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "2"}]}}, "message")


def mcp(pieces: list[bytes], request: object = MCP_CALL) -> Interaction:
    """A Streamable HTTP POST of an MCP client: SSE events of JSON-RPC messages."""
    return interaction(pieces, url="http://127.0.0.1:9/mcp", body=request,
                       outcome=Outcome.CLIENT_DISCONNECTED, error=LEFT)


# ---- the rule ------------------------------------------------------------------


def test_a_client_that_hung_up_after_done_left_after_the_end() -> None:
    assert left_after_end(left())
    assert left_after_end(left(), analyze(left()))


@pytest.mark.parametrize(
    ("name", "pieces"),
    [
        ("mid-answer", WHOLE[:2]),
        ("after the finish, before [DONE]", WHOLE[:-1]),
        ("inside the [DONE] event", [*WHOLE[:-1], b"data: [DO"]),
    ],
)
def test_a_client_that_hung_up_before_done_did_not_leave_after_the_end(name: str, pieces: list[bytes]) -> None:
    assert not left_after_end(left(pieces)), name


def test_only_the_client_hanging_up_counts_never_another_outcome() -> None:
    assert not left_after_end(openai())
    assert not left_after_end(openai(outcome=Outcome.UPSTREAM_CLOSED))
    no_head = replace(left(), response=None)
    assert not left_after_end(no_head)


def test_each_format_ends_at_its_own_marker_not_at_its_finish() -> None:
    anthropic = interaction(ANTHROPIC, url="http://127.0.0.1:9/v1/messages",
                            outcome=Outcome.CLIENT_DISCONNECTED, error=LEFT)
    assert analyze(anthropic).shape == "anthropic"
    assert left_after_end(anthropic)
    assert anthropic.response is not None
    cut = replace(anthropic, response=replace(anthropic.response, pieces=anthropic.pieces[:-1]))
    assert analyze(cut).finish is not None and not left_after_end(cut)


def test_an_mcp_stream_ends_at_the_json_rpc_answer_to_its_request() -> None:
    whole = mcp([MCP_PROGRESS, MCP_ANSWER])
    assert analyze(whole).shape == "sse" and left_after_end(whole)
    assert not left_after_end(mcp([MCP_PROGRESS]))
    other_id = {**MCP_CALL, "id": 8}
    assert not left_after_end(mcp([MCP_PROGRESS, MCP_ANSWER], other_id))
    as_string = {**MCP_CALL, "id": "7"}  # "7" is another id than 7
    assert not left_after_end(mcp([MCP_ANSWER], as_string))
    notification = {k: v for k, v in MCP_CALL.items() if k != "id"}
    assert not left_after_end(mcp([MCP_ANSWER], notification))
    error = sse({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "bad"}}, "message")
    assert left_after_end(mcp([error]))


def test_a_json_rpc_answer_is_no_end_marker_in_a_known_format() -> None:
    body = [sse({"jsonrpc": "2.0", "id": 7, "result": {}, "object": "chat.completion.chunk", "choices": []})]
    ix = interaction(body, body=MCP_CALL, outcome=Outcome.CLIENT_DISCONNECTED, error=LEFT)
    assert analyze(ix).shape == "openai-chat" and not left_after_end(ix)


# ---- check -----------------------------------------------------------------------


def test_check_finds_nothing_in_a_stream_the_client_left_after_the_end() -> None:
    assert check(left()) == []
    assert check(left(), analyze(left())) == []
    assert check(mcp([MCP_PROGRESS, MCP_ANSWER])) == []


def test_check_still_finds_the_outcome_of_a_stream_the_client_left_before_the_end() -> None:
    assert [f.code for f in check(left(WHOLE[:2]))] == ["outcome", "no-done", "no-finish"]
    assert [f.code for f in check(left(WHOLE[:-1]))] == ["outcome", "no-done"]
    (f,) = check(mcp([MCP_PROGRESS]))
    assert f.code == "outcome" and f.message == f"outcome client_disconnected: {LEFT}"


def test_check_with_a_forced_shape_reads_the_end_marker_in_that_shape() -> None:
    assert check(left(), shape="sse") == []
    assert [f.code for f in check(left(WHOLE[:-1]), shape="sse")] == ["outcome"]


# ---- a two-file diff -------------------------------------------------------------


def test_diff_of_a_stream_left_after_the_end_and_the_same_stream_complete_is_the_same() -> None:
    for a, b, tag in ((left(), openai(), "A"), (openai(), left(), "B")):
        rep = compare(a, b)
        assert rep.same and rep.exit_status == 0 and short_reason(rep) == ""
        (outcome,) = [c for c in rep.meaning.finish if c.name == "outcome"]
        assert outcome.state == Status.INFO and outcome.note == f"{tag}: {CLIENT_LEFT}"
        assert {outcome.a, outcome.b} == {"client_disconnected", "complete"}


def test_diff_shows_the_recorded_outcomes_and_why_they_are_not_counted() -> None:
    text = render_text(compare(left(), openai()))
    assert "Meaning  same" in text
    (row,) = [line for line in text.splitlines() if line.strip().startswith("outcome")]
    assert row.split() == ["outcome", "client_disconnected", "complete", "A:", "client", "left", "after", "the", "end"]
    doc = json.loads(json.dumps(report_json(compare(left(), openai()))))
    assert doc["meaning"]["same"] is True and doc["a"]["outcome"] == "client_disconnected"
    (outcome,) = [c for c in doc["meaning"]["finish"]["checks"] if c["name"] == "outcome"]
    assert outcome == {"name": "outcome", "a": "client_disconnected", "b": "complete", "state": "info",
                       "note": f"A: {CLIENT_LEFT}"}


def test_diff_of_a_stream_left_before_the_end_and_the_same_stream_complete_differs() -> None:
    rep = compare(left(WHOLE[:-1]), openai())
    assert not rep.same and rep.exit_status == 1
    (outcome,) = [c for c in rep.meaning.finish if c.name == "outcome"]
    assert outcome.state == Status.DIFFERS and outcome.note == ""
    assert short_reason(rep) == "outcome client_disconnected vs complete"


def test_diff_counts_a_client_that_left_after_the_end_against_any_outcome_but_complete() -> None:
    rep = compare(left(), openai(outcome=Outcome.UPSTREAM_CLOSED))
    assert not rep.same and short_reason(rep) == "outcome client_disconnected vs upstream_closed"
    assert compare(left(), left()).same


def test_diff_of_two_cassettes_pairs_a_stream_left_after_the_end_as_agreeing() -> None:
    result = diff_many([left()], [openai()])
    assert result.same and result.exit_status == 0


# ---- a shadow session ---------------------------------------------------------------


def test_a_shadow_primary_cut_between_its_finish_and_done_is_compared_as_recorded() -> None:
    """The same rule as check and diff: a finish is not the end marker."""
    cut = left(WHOLE[:-1])
    assert primary_for_comparison(cut, "s#0") == (cut, "s#0")
    ix, label = primary_for_comparison(left(), "s#0")
    assert ix.outcome is Outcome.COMPLETE and ix.error is None and label == f"s#0 ({CLIENT_LEFT})"
    labels = {"pair": "r-0", "backend": "a"}
    primary = replace(cut, labels={**labels, "role": "primary"})
    shadow = replace(openai(), labels={**labels, "role": "shadow", "backend": "b"})
    result, _ = diff_shadow([primary, shadow], ["s#0", "s#1"], name="s")
    (rep,) = result.reports
    assert not rep.same and short_reason(rep) == "outcome client_disconnected vs complete"

