"""``streamtape play`` and ``streamtape profiles``: the plan, its timing, the command in-process
(the command as a process of its own: tests/system/test_play.py)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import streamtape
from streamtape import Interaction
from streamtape.commands.play import plan, run
from streamtape.profiles import ADVERSARIAL, PRESETS, parse_profile
from tests.support.builders import MS, interaction
from tests.support.streams import OPENAI, binary, delta, openai_chat, sse


def tool_call_chat() -> Interaction:
    events = [
        delta(role="assistant", tool_calls=[{"index": 0, "id": "call_1", "type": "function",
                                             "function": {"name": "get_weather", "arguments": ""}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '{"city": '}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '"Oslo"}'}}]),
        sse({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        b"data: [DONE]\n\n",
    ]
    return interaction(events, first_ns=MS, gap_ns=MS, head_ns=0, end_ns=10 * MS, framing_header=False,
                       url=OPENAI, request_headers=(), body=b"{}")


def ollama_chat() -> Interaction:
    lines = [
        json.dumps({"model": "m", "message": {"role": "assistant", "content": w}, "done": False}).encode() + b"\n"
        for w in ("Reykjav", "ík")
    ]
    lines.append(b'{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}\n')
    return interaction(lines, first_ns=MS, gap_ns=MS, head_ns=0, end_ns=5 * MS, content_type="application/x-ndjson",
                       framing_header=False, url="http://127.0.0.1:11434/api/chat", request_headers=(), body=b"{}")





@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "play.tape"
    streamtape.save(path, [openai_chat(), tool_call_chat(), ollama_chat(), binary(),
                           openai_chat(outcome="upstream_closed", words=("half", " an answ"))])
    return path


def main(capsysbinary: pytest.CaptureFixture[bytes], *args: str) -> tuple[int, bytes, str]:
    """Run the CLI entry point in-process: (exit status, stdout bytes, stderr text)."""
    from streamtape.cli import main as cli_main

    with pytest.raises(SystemExit) as e:
        cli_main(list(args))
    out, err = capsysbinary.readouterr()
    code = e.value.code
    assert code is None or isinstance(code, int), code
    return code or 0, out, err.decode()


def play_text(ix: Interaction, profile: str = "instant", **kw) -> str:
    p = plan(ix, parse_profile(profile).schedule(ix), **kw)
    return b"".join(p.outputs).decode()


# --------------------------------------------------------------------------
# The plan (pure)


def test_text_mode_writes_the_assembled_answer_for_every_profile():
    ix = openai_chat()
    for text in [*PRESETS.values(), *ADVERSARIAL.values(), "chunk=bytes:3;latency=jitter:5"]:
        assert play_text(ix, text) == "Héllo wörld!", text


def test_text_appears_at_the_step_that_completes_its_event():
    ix = openai_chat()
    sched = parse_profile("chunk=utf8-split;latency=instant").schedule(ix)
    p = plan(ix, sched)
    # "Héllo" is cut inside "é": the text is written with the second half, not before
    sends = [i for i, s in enumerate(sched.steps) if s.kind == "send"]
    first_text = next(i for i, o in enumerate(p.outputs) if o)
    assert p.outputs[first_text] == "Héllo".encode()
    assert first_text == sends[2] and sched.steps[sends[1]].data.endswith(b"\xc3")


def test_tool_calls_and_ndjson_are_shown_assembled():
    assert play_text(tool_call_chat()) == '\n[tool call get_weather] {"city": "Oslo"}'
    assert play_text(ollama_chat()) == "Reykjavík"


def test_raw_mode_and_non_llm_bodies_write_the_bytes_as_scheduled():
    ix = openai_chat()
    sched = parse_profile("chunk=bytes:5").schedule(ix)
    p = plan(ix, sched, raw=True)
    assert ix.response is not None
    assert p.mode == "raw" and b"".join(p.outputs) == ix.response.body
    assert [o for o in p.outputs if o] == sched.pieces
    b = plan(binary(), parse_profile("faithful").schedule(binary()))
    assert b.mode == "raw" and b"".join(b.outputs) == b"\x00\x01plain bytes\xff"


def test_boundaries_mark_every_piece_with_its_gap_and_size_and_the_end():
    ix = openai_chat(words=("a",), gap_ms=40)
    p = plan(ix, parse_profile("faithful").schedule(ix), raw=True)
    out = io.BytesIO()
    run(p, out, boundaries=True, sleep=False)
    text = out.getvalue().decode()
    assert text.startswith("[head 200 at 5.0ms][+35.0ms ")
    assert text.count("[+40.0ms ") == len(ix.pieces) - 1
    assert text.endswith("[end +1.0ms]")
    assert len(re.findall(r"\[\+\d+\.\dms \d+B\]", text)) == len(ix.pieces)
    assert ix.response is not None
    assert re.sub(r"\[(head|\+|end)[^\]]*\]", "", text).encode() == ix.response.body


@pytest.mark.realtime
def test_run_keeps_the_recorded_timing():
    ix = openai_chat(words=("a", "b", "c"), gap_ms=30)
    p = plan(ix, parse_profile("faithful").schedule(ix))
    first, elapsed = run(p, io.BytesIO())
    assert ix.end_ns is not None
    assert abs(first - 30 * MS) < 15 * MS
    assert abs(elapsed - ix.end_ns) < 20 * MS


# --------------------------------------------------------------------------
# The CLI entry point, in-process


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["--profile", "chunk=bytes:0"], "bad item 'chunk=bytes:0'"),
        (["--profile", "fault=cut-event:50"], "only 6 events"),
        (["-i", "9"], "no interaction 9"),
    ],
)
def test_play_cli_user_mistakes_are_one_line_and_exit_2(cassette: Path, args: list[str], expect: str,
                                                         capsysbinary):
    code, out, err = main(capsysbinary, "play", str(cassette), *args)
    assert code == 2 and out == b""
    assert err.count("\n") == 1 and err.startswith("streamtape: error: ") and expect in err, err


def test_play_cli_missing_file_is_one_line(tmp_path: Path, capsysbinary):
    code, _, err = main(capsysbinary, "play", str(tmp_path / "nope.tape"))
    assert code == 2 and err.count("\n") == 1 and "nope.tape" in err


def test_profiles_cli_checks_a_profile(capsysbinary):
    code, out, _ = main(capsysbinary, "profiles", "instant;fault=cut:50%")
    assert code == 0 and out.splitlines()[0] == b"chunk=recorded;latency=instant;fault=cut:50%"
    assert b"  fault=cut:50%" in out  # each item explained (tests/unit/test_messages.py)
    code, _, err = main(capsysbinary, "profiles", "fault=stall:x:1")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("streamtape: error: profile 'fault=stall:x:1': bad item")


def test_play_cli_shows_a_status_fault_as_its_error_body(cassette: Path, capsysbinary):
    code, out, err = main(capsysbinary, "play", str(cassette), "--profile", "instant;fault=status:429")
    assert code == 0, err
    assert "error" in json.loads(out)
    assert " 429 (raw bytes) " in err


def test_play_cli_boundaries_mark_pieces_in_text_mode(cassette: Path, capsysbinary):
    code, raw, _ = main(capsysbinary, "play", str(cassette), "--boundaries",
                          "--profile", "chunk=bytes:64;latency=instant")
    out = raw.decode()
    assert code == 0 and out.startswith("[head 200 at 0.0ms][+0.0ms 64B]")
    assert re.sub(r"\[(head|\+|end)[^\]]*\]", "", out) == "Héllo wörld!\n"
    assert out.rstrip().endswith("[end +0.0ms]")
