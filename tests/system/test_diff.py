"""``streamtape diff``: pairs recorded through the real recorder (mitmproxy) from scripted
upstreams on 127.0.0.1, compared on meaning, timing and wire framing; gates; bad input. Gates,
pairing and reports of built values are tests/unit/test_diff.py."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import httpx
import pytest

import streamtape
from streamtape.serve import ReplayServer
from tests.support.diff_backends import HELLO, TEXT, one, rechunk
from tests.support.fixtures_sdk import openai_chat
from tests.support.processes import STREAMTAPE
from tests.support.recording import recording
from tests.support.recording import run_main as run

# ---------------------------------------------------------------------------
# Recorded pairs through the CLI


def test_same_text_under_different_chunking_is_the_same_meaning_with_a_different_wire(recorded, capsys) -> None:
    code, out, err = run("diff", recorded["hello"], recorded["hello_rechunked"], capsys=capsys)
    assert code == 0, out + err
    assert "Meaning  same" in out
    assert "Wire  differs" in out
    assert "\x1b[" not in out  # not a terminal: plain text

    code, out, _ = run("diff", "--json", recorded["hello"], recorded["hello_rechunked"], capsys=capsys)
    doc = json.loads(out)
    assert code == 0 and doc["exit_status"] == 0 and doc["same"] is True
    (p,) = doc["pairs"]
    assert p["paired_by"] == "request"  # same JSON body, other key order and spacing
    assert p["meaning"]["text"]["a"] == p["meaning"]["text"]["b"] == TEXT
    wire = {r["name"]: r for r in p["wire"]["rows"]}
    assert wire["pieces"]["a"] == len(HELLO)
    assert wire["pieces"]["b"] == len(rechunk(b"".join(HELLO), 61))
    assert not wire["pieces"]["same"] and not wire["events per piece"]["same"]
    assert wire["events"]["same"] and wire["format"]["same"]
    assert wire["cut characters"]["a"] == 0 and wire["cut characters"]["b"] >= 1
    # Date and X-Request-Id differ on every response and are left out; X-Served-By is not.
    assert [h["name"].lower() for h in p["wire"]["headers"]] == ["x-served-by"]


def test_different_text_exits_1_and_shows_a_unified_diff(recorded, capsys) -> None:
    code, out, _ = run("diff", recorded["hello"], recorded["hello_moon"], capsys=capsys)
    assert code == 1
    assert "Meaning  differs in text" in out
    assert "-Hello there, wörld & <friends>!" in out
    assert "+Hello there, moon!" in out
    assert "first difference at character 13" in out
    assert "words: Hello there, [-wörld & <friends>-]{+moon+}!" in out
    code, out, _ = run("diff", "--json", recorded["hello"], recorded["hello_moon"], capsys=capsys)
    text = json.loads(out)["pairs"][0]["meaning"]["text"]
    assert code == 1 and text["same"] is False
    assert text["unified_diff"][0].startswith("---") and "+Hello there, moon!" in text["unified_diff"]
    assert text["word_diff"] == [["=", "Hello there, "], ["-", "wörld & <friends>"], ["+", "moon"], ["=", "!"]]


def test_ignore_text_relaxes_the_verdict(recorded, capsys) -> None:
    code, out, _ = run("diff", "--ignore", "text", recorded["hello"], recorded["hello_moon"], capsys=capsys)
    assert code == 0
    assert "differs (ignored)" in out


def test_length_against_stop_differs_in_finish(recorded, capsys) -> None:
    code, out, _ = run("diff", "--json", recorded["hello"], recorded["hello_length"], capsys=capsys)
    assert code == 1
    m = json.loads(out)["pairs"][0]["meaning"]
    assert m["differs"] == ["finish"]
    reason = next(c for c in m["finish"]["checks"] if c["name"] == "reason")
    assert (reason["a"], reason["b"], reason["state"]) == ("stop", "length", "differs")
    code, out, _ = run("diff", recorded["hello"], recorded["hello_length"], capsys=capsys)
    assert code == 1 and "differs in finish" in out
    code, _, _ = run("diff", "--ignore", "finish", recorded["hello"], recorded["hello_length"], capsys=capsys)
    assert code == 0


def test_a_mid_stream_error_event_differs_in_finish_and_names_the_error(recorded, capsys) -> None:
    code, out, _ = run("diff", recorded["hello"], recorded["hello_error"], capsys=capsys)
    assert code == 1
    assert "differs in text, finish" in out
    assert re.search(r"error events\s+none\s+model overloaded\s+DIFFERS", out)
    code, _, _ = run("diff", "--ignore", "text", recorded["hello"], recorded["hello_error"], capsys=capsys)
    assert code == 1  # the finish still differs
    code, _, _ = run("diff", "--ignore", "text", "--ignore", "finish", recorded["hello"], recorded["hello_error"], capsys=capsys)
    assert code == 0


def test_tool_call_arguments_in_other_key_order_and_fragments_are_equal(recorded, capsys) -> None:
    code, out, _ = run("diff", "--json", recorded["tools"], recorded["tools_reordered"], capsys=capsys)
    assert code == 0, out
    calls = json.loads(out)["pairs"][0]["meaning"]["tool_calls"]
    assert calls["same"] is True
    (c,) = calls["calls"]
    assert c["name_a"] == c["name_b"] == "get_weather"
    assert c["arguments_a"] == c["arguments_b"] == {"city": "Paris", "unit": "celsius", "days": 2}


def test_tool_call_with_other_arguments_differs(recorded, capsys) -> None:
    code, out, _ = run("diff", recorded["tools"], recorded["tools_other_city"], capsys=capsys)
    assert code == 1
    assert "differs in tools" in out and "arguments differ" in out
    assert '"city": "Lyon"' in out


def test_openai_stream_against_ollama_ndjson_compares_meaning_and_timing_and_names_the_format(recorded, capsys) -> None:
    code, out, _ = run("diff", "--json", recorded["hello"], recorded["ollama"], capsys=capsys)
    doc = json.loads(out)
    (p,) = doc["pairs"]
    assert p["paired_by"] == "only interaction"
    assert any(d.startswith("path /v1/chat/completions vs /api/chat") for d in p["request_differences"])
    m = p["meaning"]
    assert m["text"]["same"] is True and m["text"]["b"] == TEXT
    reason = next(c for c in m["finish"]["checks"] if c["name"] == "reason")
    assert reason["a"] == reason["b"] == "stop"
    # Only Ollama reports token counts here: shown, not counted as a difference.
    completion = next(c for c in m["usage"]["checks"] if c["name"] == "completion_tokens")
    assert (completion["a"], completion["b"], completion["state"]) == (None, 6, "info")
    assert code == 0 and doc["same"] is True
    wire = {r["name"]: r for r in p["wire"]["rows"]}
    assert (wire["format"]["a"], wire["format"]["b"]) == ("openai-chat", "ollama-chat")
    assert (wire["wire"]["a"], wire["wire"]["b"]) == ("sse", "ndjson")
    assert wire["content type"]["b"] == "application/x-ndjson"
    timing = {r["metric"]: r for r in p["timing"]}
    for metric in ("ttfb", "ttft", "p50_gap", "duration"):
        assert timing[metric]["a"] is not None and timing[metric]["b"] is not None, metric
        assert timing[metric]["ratio"] is not None
    code, out, _ = run("diff", recorded["hello"], recorded["ollama"], capsys=capsys)
    assert "openai-chat" in out and "ollama-chat" in out and "requests differ" in out


def test_timing_gates_pass_and_fail_with_exit_status(recorded, capsys) -> None:
    a, slow = recorded["hello"], recorded["hello_slow"]
    # B waits 300 ms before its first event; A answers at once.
    code, out, _ = run("diff", a, slow, "--fail-on", "ttft>1.5x", "--fail-on", "duration>30s", capsys=capsys)
    assert code == 1, out
    assert "meaning same" in out and "1 gate(s) failed (ttft>1.5x)" in out  # the failed gate, named
    assert "FAILED" in out
    code, out, _ = run("diff", "--json", a, slow, "--fail-on", "ttft>+250ms", "--fail-on", "p95_gap>+5s", capsys=capsys)
    gates = {g["gate"]: g for g in json.loads(out)["pairs"][0]["gates"]}
    assert code == 1
    assert gates["ttft>+250ms"]["ok"] is False and gates["ttft>+250ms"]["measured"] >= 250e6
    assert gates["p95_gap>+5s"]["ok"] is True
    # Generous gates on the same pair pass: exit 0.
    code, out, _ = run("diff", a, slow, "--fail-on", "ttft>+20s", "--fail-on", "duration>30s", capsys=capsys)
    assert code == 0, out
    assert "gates pass" in out


def test_malformed_gate_is_one_line_error_with_exit_2(recorded, capsys) -> None:
    code, out, err = run("diff", recorded["hello"], recorded["hello"], "--fail-on", "ttft>>1.5x", capsys=capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("streamtape: error: bad --fail-on gate 'ttft>>1.5x'")
    code, _, err = run("diff", recorded["hello"], recorded["hello"], "--fail-on", "ttfx>2x", capsys=capsys)
    assert code == 2 and "unknown metric 'ttfx'" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        ("#1", "no interaction #1; "),
        ("#x", "expected FILE#N with N a whole number"),
        ("#-1", "expected FILE#N with N a whole number"),
        ("#", "expected FILE#N with N a whole number"),
    ],
)
def test_bad_file_index_is_one_line_error_with_exit_2(recorded, capsys, suffix: str, message: str) -> None:
    bad = f"{recorded['hello']}{suffix}"
    code, out, err = run("diff", f"{recorded['hello']}#0", bad, capsys=capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("streamtape: error: ") and message in err
    assert bad in err


def test_missing_or_bad_cassette_and_bad_options_exit_2(recorded, tmp_path, capsys) -> None:
    code, _, err = run("diff", tmp_path / "nope.tape", recorded["hello"], capsys=capsys)
    assert code == 2 and "no such cassette file" in err and err.count("\n") == 1
    junk = tmp_path / "junk.tape"
    junk.write_bytes(b"not a cassette")
    code, _, err = run("diff", recorded["hello"], f"{junk}#0", capsys=capsys)
    assert code == 2 and "not a streamtape cassette" in err
    code, _, err = run("diff", recorded["hello"], recorded["hello"], "--ignore", "colour", capsys=capsys)
    assert code == 2 and "--ignore" in err and err.count("\n") == 1
    code, _, err = run("diff", recorded["hello"], recorded["hello"], "--shape", "klingon", capsys=capsys)
    assert code == 2 and "klingon" in err and err.count("\n") == 1


def test_shape_option_forces_the_format_per_side(recorded, capsys) -> None:
    code, out, _ = run("diff", "--json", "--shape", "openai-chat,ollama-chat", recorded["hello"], recorded["ollama"], capsys=capsys)
    assert code == 0 and json.loads(out)["same"] is True
    # Reading an SSE stream as Ollama NDJSON finds no text: the meaning differs.
    code, out, _ = run("diff", "--json", "--shape", "ollama-chat", recorded["hello"], recorded["ollama"], capsys=capsys)
    p = json.loads(out)["pairs"][0]
    assert code == 1 and p["a"]["shape"] == "ollama-chat" and p["meaning"]["text"]["a"] == ""
    code, _, err = run("diff", "--shape", "openai-chat,", recorded["hello"], recorded["ollama"], capsys=capsys)
    assert code == 2 and "NAME_A,NAME_B" in err


def test_a_folder_of_cassettes_is_one_side(recorded, tmp_path, capsys) -> None:
    folder = tmp_path / "nightly"
    folder.mkdir()
    streamtape.save(folder / "1.tape", [one(recorded["tools_reordered"])])
    streamtape.save(folder / "2.tape", [one(recorded["hello_rechunked"])])
    both = tmp_path / "base.tape"
    streamtape.save(both, [one(recorded["hello"]), one(recorded["tools"])])
    code, out, _ = run("diff", "--json", both, folder, capsys=capsys)
    doc = json.loads(out)
    assert code == 0 and len(doc["pairs"]) == 2 and doc["unpaired"] == []
    assert [p["b"]["label"] for p in doc["pairs"]] == [f"{folder / '2.tape'}#0", f"{folder / '1.tape'}#0"]


def test_file_hash_n_compares_two_interactions_of_one_cassette(recorded, tmp_path, capsys) -> None:
    both = tmp_path / "both.tape"
    streamtape.save(both, [one(recorded["hello"]), one(recorded["hello_length"])])
    code, out, _ = run("diff", f"{both}#0", f"{both}#1", capsys=capsys)
    assert code == 1 and f"{both}#0" in out and "differs in finish" in out
    code, _, _ = run("diff", f"{both}#0", f"{both}#0", capsys=capsys)
    assert code == 0


def test_whole_cassettes_are_paired_by_request_and_unpaired_ones_listed(recorded, tmp_path, capsys) -> None:
    a, b, b_extra = tmp_path / "a.tape", tmp_path / "b.tape", tmp_path / "b_extra.tape"
    streamtape.save(a, [one(recorded["hello"]), one(recorded["tools"])])
    streamtape.save(b, [one(recorded["tools_reordered"]), one(recorded["hello_rechunked"])])
    streamtape.save(b_extra, [one(recorded["tools_reordered"]), one(recorded["ollama"]), one(recorded["hello_rechunked"])])
    code, out, _ = run("diff", "--json", a, b, capsys=capsys)
    doc = json.loads(out)
    assert code == 0 and doc["unpaired"] == []
    assert [(p["a"]["label"], p["b"]["label"]) for p in doc["pairs"]] == [(f"{a}#0", f"{b}#1"), (f"{a}#1", f"{b}#0")]
    code, out, _ = run("diff", a, b, capsys=capsys)
    assert out.startswith("Pairs  2 paired by request\n")
    assert re.search(rf"{re.escape(str(a))}#1\s+{re.escape(str(b))}#0\s+POST /v1/chat/completions\s+same\s+differs", out)
    code, out, _ = run("diff", a, b_extra, capsys=capsys)
    assert code == 1
    assert f"only in B  {b_extra}#1  POST /api/chat" in out
    assert "1 unpaired" in out


def test_color_only_on_a_terminal(recorded) -> None:
    args = [*STREAMTAPE, "diff", str(recorded["hello"]), str(recorded["hello_moon"])]
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    piped = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert piped.returncode == 1 and "\x1b[" not in piped.stdout and "+Hello there, moon!" in piped.stdout
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdout=follower, stderr=subprocess.PIPE, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO once the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) == 1
    tty_out = b"".join(chunks).decode()
    assert "\x1b[31m" in tty_out  # red for the removed line / the verdict
    assert "\x1b[32m+Hello there, moon!" in tty_out


def test_html_option_writes_the_page(recorded, tmp_path, capsys) -> None:
    page = tmp_path / "d.html"
    code, _out, _ = run("diff", recorded["hello"], recorded["ollama"], "--html", page, capsys=capsys)
    assert code == 0 and page.exists()
    text = page.read_text()
    assert text.count('class="tick"') == len(one(recorded["hello"]).pieces) + len(one(recorded["ollama"]).pieces)


@pytest.mark.slow
def test_real_llama_server_stream_behind_a_distorting_gateway_keeps_its_meaning(tmp_path, capsys) -> None:
    """A real llama-server capture, replayed by ``streamtape serve`` as a gateway that
    splits every character, adds keep-alive comments and runs twice as fast, recorded
    through ``streamtape record``: diff says same meaning, names the wire changes and
    the timing ratio."""
    original = openai_chat()
    direct, gateway = tmp_path / "direct.tape", tmp_path / "gateway.tape"
    streamtape.save(direct, [original])
    profile = "chunk=utf8-split;latency=scale:0.5;fault=keepalive:0"
    with ReplayServer([original], profile=profile) as srv, recording(gateway, upstream=srv.url) as rec:
        with httpx.Client(timeout=10) as client, client.stream(
            "POST", rec.url + "/v1/chat/completions", content=original.request.body,
            headers={"Content-Type": "application/json"},
        ) as r:
            assert r.status_code == 200
            r.read()
        rec.wait_lines(1)
    code, out, err = run("diff", "--json", direct, gateway, "--fail-on", "duration>0.9x", capsys=capsys)
    assert code == 0, out + err
    (p,) = json.loads(out)["pairs"]
    assert p["paired_by"] == "request" and p["meaning"]["text"]["same"]
    wire = {r["name"]: r for r in p["wire"]["rows"]}
    assert wire["keep-alive comments"]["a"] == 0 and wire["keep-alive comments"]["b"] >= 1
    assert wire["pieces"]["b"] > wire["pieces"]["a"]
    assert wire["cut characters"]["b"] > wire["cut characters"]["a"]
    assert wire["format"]["a"] == wire["format"]["b"] == "openai-chat"
    timing = {r["metric"]: r for r in p["timing"]}
    assert 0.2 < timing["duration"]["ratio"] < 0.9  # scale:0.5, on a possibly loaded machine
    code, out, _ = run("diff", direct, gateway, "--fail-on", "duration<0.9x", capsys=capsys)
    assert code == 1 and "1 gate(s) failed" in out


def test_module_entry_point_exit_codes(recorded) -> None:
    same = subprocess.run([*STREAMTAPE, "diff", str(recorded["hello"]), str(recorded["hello_rechunked"])], capture_output=True, text=True, timeout=60)
    assert same.returncode == 0, same.stderr
    bad = subprocess.run([*STREAMTAPE, "diff", f"{recorded['hello']}#9", str(recorded["hello"])], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("streamtape: error: ") and "Traceback" not in bad.stderr


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
