"""``streamtape check``: findings per interaction, and the command's output and exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import streamtape
from streamtape import Interaction, Request
from streamtape.cassette.model import Outcome
from streamtape.check import check
from tests.corpus import capture
from tests.support.builders import MS, interaction
from tests.support.recording import run_main


def ix_of(body: bytes, path: str = "/v1/chat/completions", ct: str = "text/event-stream", req: bytes = b"{}",
          status: int = 200, outcome: str = "complete", error: str | None = None) -> Interaction:
    """The whole body in one piece at 1 ms; the end at 2 ms."""
    return interaction([body], times=[MS], head_ns=0, end_ns=2 * MS, status=status,
                       reason="OK" if status == 200 else "Error", content_type=ct, framing_header=False,
                       outcome=outcome, error=error, url=f"http://127.0.0.1:8080{path}", request_headers=(),
                       body=req)


def codes(ix, **kw):
    return [f.code for f in check(ix, **kw)]


def chunk(delta, finish=None):
    return "data: " + json.dumps({"object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"


CLEAN = (chunk({"role": "assistant", "content": ""}) + chunk({"content": "Hi"})
         + chunk({}, "stop") + "data: [DONE]\n\n").encode()


def test_clean_stream_has_no_findings():
    assert check(ix_of(CLEAN)) == []
    assert check(capture("chat_eos_stop_tiny")) == []


def test_missing_done_and_missing_finish():
    body = (chunk({"content": "Hi"})).encode()
    assert codes(ix_of(body)) == ["no-done", "no-finish"]


def test_finish_length_names_the_event():
    [f] = check(capture("chat_limit_tiny"))
    assert f.code == "finish-length" and f.event == 11 and "cut" in f.message


def test_control_tokens_in_text():
    body = (chunk({"content": "Hello<|im_end|>"}) + chunk({"content": "<|eot_id|></s>"})
            + chunk({}, "stop") + "data: [DONE]\n\n").encode()
    fs = check(ix_of(body))
    assert [f.message for f in fs] == ["control token <|im_end|> in the text",
                                       "control token <|eot_id|> in the text",
                                       "control token </s> in the text"]


def test_invalid_json_event_with_its_index():
    body = CLEAN.replace(b'data: {"object"', b'data: {"object"', 1)
    body = chunk({"content": "a"}).encode() + b"data: {not json\n\n" + CLEAN
    [f] = check(ix_of(body))
    assert f.code == "invalid-json" and f.event == 1 and "{not json" in f.message


def test_error_event_after_200():
    body = chunk({"content": "a"}).encode() + b'data: {"error": {"message": "overloaded"}}\n\n'
    fs = check(ix_of(body))
    assert "error-event" in [f.code for f in fs]
    assert next(f for f in fs if f.code == "error-event").message == \
        "error event after HTTP 200: overloaded"


def test_keepalive_comments_reported():
    assert codes(ix_of(b": keep-alive\n\n: keep-alive\n\n" + CLEAN)) == ["keepalive"]
    assert "2 keep-alive comments" in check(ix_of(b": ka\n\n: ka\n\n" + CLEAN))[0].message


def test_usage_missing_though_requested():
    req = json.dumps({"stream": True, "stream_options": {"include_usage": True}}).encode()
    assert codes(ix_of(CLEAN, req=req)) == ["usage-missing"]
    assert check(capture("chat_stream_usage_slow"), shape=None)[0].code == "finish-length"


def test_outcome_not_complete_and_cut_event():
    ix = ix_of(CLEAN[:-8], outcome="upstream_closed", error="incomplete chunked read")
    assert codes(ix) == ["outcome", "no-done", "cut-event"]


def test_no_response_and_http_error():
    ix = Interaction(Request("POST", "http://127.0.0.1:1/v1/chat/completions"), None,
                     outcome=Outcome.UPSTREAM_ERROR, error="connection refused")
    assert codes(ix) == ["no-response"]
    assert codes(ix_of(b'{"error": "x"}', ct="application/json", status=500)) == ["http-status"]


def test_final_markers_of_other_formats():
    ollama = ix_of(b'{"message": {"role": "assistant", "content": "hi"}, "done": false}\n',
                   path="/api/chat", ct="application/x-ndjson")
    fs = check(ollama)
    assert [f.code for f in fs] == ["no-done", "no-finish"]
    assert '"done": true' in fs[0].message
    anth = capture("anthropic_messages_slow")
    assert codes(anth) == ["finish-length"]


def test_tool_call_arguments_not_json_when_joined():
    body = (chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f",
                                                                        "arguments": '{"a": '}}]})
            + chunk({}, "tool_calls") + "data: [DONE]\n\n").encode()
    assert codes(ix_of(body)) == ["tool-args-invalid"]


def test_a_stream_asked_for_and_answered_in_plain_text_is_not_a_stream():
    assert codes(ix_of(b"plain text answer", ct="text/plain", req=b'{"stream": true}')) == ["not-a-stream"]
    # Ollama's chat streams unless told not to; a path that names a stream asks for one.
    assert codes(ix_of(b"plain", path="/api/chat", ct="text/plain")) == ["not-a-stream"]
    assert codes(ix_of(b"{}", path="/ml/v1/text/generation_stream", ct="application/json")) == ["not-a-stream"]


def test_a_json_answer_to_a_call_that_asked_no_stream_is_no_finding():
    # watsonx.ai's IAM token, project and model-spec calls, recorded with --all before its stream
    assert codes(ix_of(b'{"access_token": "t"}', path="/identity/token", ct="application/json",
                       req=b"grant_type=x")) == []
    assert codes(ix_of(b'{"id": "c"}', ct="application/json", req=b'{"stream": false}')) == []
    assert codes(ix_of(b'{"done": true}', path="/api/chat", ct="application/json",
                       req=b'{"stream": false}')) == []


# ---- the command ------------------------------------------------------------


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_main(*argv, capsys=capsys)


@pytest.fixture
def tapes(tmp_path: Path) -> dict[str, Path]:
    clean = tmp_path / "clean.tape"
    streamtape.save(clean, [ix_of(CLEAN), capture("chat_eos_stop_tiny")])
    bad = tmp_path / "bad.tape"
    streamtape.save(bad, [ix_of(CLEAN), capture("chat_limit_tiny"),
                          ix_of(b": ka\n\n" + CLEAN[:-8], outcome="upstream_closed")])
    junk = tmp_path / "junk.tape"
    junk.write_bytes(b"not a cassette")
    return {"clean": clean, "bad": bad, "junk": junk}


def test_check_clean_exits_0(tapes, capsys):
    code, out, _ = run(["check", str(tapes["clean"])], capsys)
    assert code == 0
    assert out.splitlines()[0].startswith("#0 POST /v1/chat/completions 200")
    assert out.splitlines()[0].endswith("[openai-chat]  ok")
    assert out.splitlines()[-1] == "0 findings (0 error, 0 warning, 0 info) in 2 interactions; 0 at or above error"


def test_check_findings_exit_1_text(tapes, capsys):
    code, out, _ = run(["check", str(tapes["bad"])], capsys)
    assert code == 1
    assert "  warning: finish-length: finish reason length (length): the answer was cut (event 11)" in out
    assert "  info: keepalive: 1 keep-alive comment in the stream" in out
    assert "  error: outcome: outcome upstream_closed" in out
    assert out.splitlines()[-1].startswith("5 findings (")
    assert out.splitlines()[-1].endswith(") in 3 interactions; 3 at or above error")


def test_check_json(tapes, capsys):
    code, out, _ = run(["check", "--json", str(tapes["bad"])], capsys)
    assert code == 1
    doc = json.loads(out)
    assert doc["findings"] == 5
    assert [i["index"] for i in doc["interactions"]] == [0, 1, 2]
    assert doc["interactions"][1]["findings"] == [
        {"code": "finish-length", "message": "finish reason length (length): the answer was cut",
         "event": 11, "severity": "warning"}]
    assert doc["fail_on"] == "error" and doc["failing"] == sum(doc["by_severity"][s] for s in ("error",))
    assert doc["by_severity"]["info"] == 1 and doc["damage"] == []


def test_a_max_tokens_stop_and_a_keepalive_pass_the_default_gate_and_fail_fail_on_warning(tmp_path, capsys):
    p = tmp_path / "healthy.tape"
    streamtape.save(p, [capture("chat_limit_tiny"), ix_of(b": ka\n\n" + CLEAN)])
    code, out, _ = run(["check", str(p)], capsys)
    assert code == 0 and "warning: finish-length" in out and "info: keepalive" in out
    code, _, _ = run(["check", "--fail-on", "warning", str(p)], capsys)
    assert code == 1
    code, out, _ = run(["check", "--fail-on", "warning", "--ignore", "finish-length", str(p)], capsys)
    assert code == 0 and "finish-length" not in out  # the keep-alive is info: below any gate


def test_ignore_drops_an_error_finding_from_the_output_the_json_and_the_exit_status(tapes, capsys):
    code, out, _ = run(["check", "--json", "--ignore", "outcome", "--ignore", "no-done", "--ignore", "cut-event",
                        "--ignore", "no-finish", str(tapes["bad"])], capsys)
    doc = json.loads(out)
    got = {f["code"] for i in doc["interactions"] for f in i["findings"]}
    assert got == {"finish-length", "keepalive"} and code == 0 and doc["failing"] == 0


def test_a_finding_code_missing_from_the_table_gets_the_documented_default_severity():
    from streamtape.check import Finding
    from streamtape.check.severity import DEFAULT_SEVERITY, SEVERITY, Severity, severity_of

    assert DEFAULT_SEVERITY is Severity.WARNING and "some-new-format-code" not in SEVERITY
    assert severity_of("some-new-format-code") is Severity.WARNING
    assert Finding("some-new-format-code", "x").to_dict()["severity"] == "warning"  # type: ignore[arg-type]
    assert [severity_of(c) for c in ("cut-event", "error-event", "decode-error", "damaged-record")] == [Severity.ERROR] * 4
    assert [severity_of(c) for c in ("finish-length", "control-token", "keepalive")] == [
        Severity.WARNING, Severity.WARNING, Severity.INFO]


def test_a_damaged_record_is_an_error_finding_naming_its_byte_and_the_interaction_it_cost(tmp_path, capsys):
    from tests.support.damage import record

    rec = record(tmp_path / "r.tape", 3)
    a, b = rec.spans[1]
    buf = bytearray(rec.data)
    buf[(a + b) // 2] ^= 0x04
    p = tmp_path / "damaged.tape"
    p.write_bytes(bytes(buf))
    code, out, err = run(["check", "--json", str(p)], capsys)
    doc = json.loads(out)
    assert code == 1 and len(doc["interactions"]) == 2
    (d,) = doc["damage"]
    assert d["code"] == "damaged-record" and d["severity"] == "error" and d["file"] == str(p)
    assert "left out interaction #1" in d["message"] and "damaged record at byte" in d["message"]
    assert "1 damaged record(s) skipped" in err


def test_check_shape_override(tapes, capsys):
    code, out, _ = run(["check", "--shape", "sse", str(tapes["clean"])], capsys)
    assert code == 0 and "[sse]  ok" in out
    code, _, err = run(["check", "--shape", "bogus", str(tapes["clean"])], capsys)
    assert code == 2 and err.startswith("streamtape: error: unknown shape 'bogus'")


def test_check_bad_input_exits_2(tapes, tmp_path, capsys):
    code, out, err = run(["check", str(tapes["junk"])], capsys)
    assert code == 2 and out == "" and err.startswith("streamtape: error: ") and "junk.tape" in err
    code, _, err = run(["check", str(tmp_path / "missing.tape")], capsys)
    assert code == 2 and "missing.tape" in err
