"""``streamtape play`` and ``streamtape profiles``."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import streamtape
from streamtape import Interaction
from streamtape.commands.play import plan, run
from streamtape.commands.profiles import listing
from streamtape.profiles import ADVERSARIAL, PRESETS, parse_profile
from tests.support import builders
from tests.support.builders import MS, interaction

ROOT = Path(__file__).resolve().parent.parent
OPENAI = "https://api.openai.com/v1/chat/completions"


def sse(doc: object) -> bytes:
    return builders.sse(doc, compact=False)


def delta(**d: object) -> bytes:
    return sse({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d}]})


def openai_chat(words=("Héllo", " wörld", "!"), *, gap_ms: int = 40, outcome: str = "complete",
                done: bool = True) -> Interaction:
    events = [delta(role="assistant", content="")] + [delta(content=w) for w in words]
    if outcome == "complete":
        events.append(sse({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        if done:
            events.append(b"data: [DONE]\n\n")
    return interaction(events, first_ns=gap_ms * MS, gap_ns=gap_ms * MS, head_ns=5 * MS, framing_header=False,
                       outcome=outcome, url=OPENAI, request_headers=())


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


def binary() -> Interaction:
    return interaction([b"\x00\x01plain", b" bytes\xff"], times=[MS, 2 * MS], head_ns=0, end_ns=3 * MS,
                       content_type="application/octet-stream", framing_header=False, method="GET",
                       url="https://h/blob", request_headers=(), body=b"")


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "play.tape"
    streamtape.save(path, [openai_chat(), tool_call_chat(), ollama_chat(), binary(),
                           openai_chat(outcome="upstream_closed", words=("half", " an answ"))])
    return path


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "streamtape.cli", *args], capture_output=True,
                          timeout=timeout, env=env, cwd=ROOT)


def main(capsysbinary: pytest.CaptureFixture[bytes], *args: str) -> tuple[int, bytes, str]:
    """Run the CLI entry point in-process: (exit status, stdout bytes, stderr text)."""
    from streamtape.cli import main as cli_main

    with pytest.raises(SystemExit) as e:
        cli_main(list(args))
    out, err = capsysbinary.readouterr()
    return e.value.code, out, err.decode()


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
    assert re.sub(r"\[(head|\+|end)[^\]]*\]", "", text).encode() == ix.response.body


@pytest.mark.realtime
def test_run_keeps_the_recorded_timing():
    ix = openai_chat(words=("a", "b", "c"), gap_ms=30)
    p = plan(ix, parse_profile("faithful").schedule(ix))
    first, elapsed = run(p, io.BytesIO())
    assert abs(first - 30 * MS) < 15 * MS
    assert abs(elapsed - ix.end_ns) < 20 * MS


# --------------------------------------------------------------------------
# The real CLI


def test_play_cli_writes_the_answer_then_one_summary_line(cassette: Path):
    r = cli("play", str(cassette), "--profile", "instant")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "Héllo wörld!\n"
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("#0 POST /v1/chat/completions 200 (openai-chat) profile instant: 6 pieces")
    assert lines[0].endswith("ended cleanly")


def test_play_cli_raw_writes_exactly_the_recorded_bytes(cassette: Path):
    r = cli("play", str(cassette), "-i", "3", "--raw", "--profile", "instant")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"\x00\x01plain bytes\xff"


def test_play_cli_reports_a_recorded_cut(cassette: Path):
    r = cli("play", str(cassette), "-i", "4", "--profile", "instant")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "half an answ\n"
    assert r.stderr.decode().rstrip().endswith("cut (no clean end)")


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


@pytest.mark.realtime
@pytest.mark.slow
def test_play_cli_streams_in_real_time(tmp_path: Path):
    path = tmp_path / "slow.tape"
    streamtape.save(path, [openai_chat(words=("one", " two", " three"), gap_ms=250)])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "streamtape.cli", "play", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    arrivals = []
    assert proc.stdout is not None
    while True:
        data = os.read(proc.stdout.fileno(), 100)
        if not data:
            break
        arrivals.append((time.perf_counter(), data))
    proc.wait(timeout=30)
    words = [d for _, d in arrivals if d.strip()]
    assert words[:3] == [b"one", b" two", b" three"]
    times = [t for t, d in arrivals if d.strip()]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(0.15 < g < 0.45 for g in gaps[:2]), gaps


def test_profiles_cli_lists_presets_the_adversarial_set_and_the_syntax(capsysbinary):
    r = cli("profiles")
    assert r.returncode == 0
    out = r.stdout.decode()
    assert out.strip() == listing().strip()
    for name in PRESETS:
        assert f"  {name} " in out
    for name in ADVERSARIAL:
        assert f"adversarial:{name}" in out
    assert "chunk=" in out and "latency=" in out and "fault=" in out and "seed=N" in out
    code, out_json, _ = main(capsysbinary, "profiles", "--json")
    assert code == 0
    j = json.loads(out_json)
    assert j == {"presets": PRESETS, "adversarial": ADVERSARIAL}


def test_profiles_cli_checks_a_profile(capsysbinary):
    code, out, _ = main(capsysbinary, "profiles", "instant;fault=cut:50%")
    assert code == 0 and out == b"chunk=recorded;latency=instant;fault=cut:50%\n"
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
