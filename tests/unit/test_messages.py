"""Errors and notes that say what happened: each message a user reads, pinned."""

from __future__ import annotations

from pathlib import Path

import pytest

import streamtape
from tests.support.builders import MS, interaction
from tests.support.recording import run_main
from tests.support.streams import openai_chat


def test_a_negative_latency_scale_says_the_number_must_be_positive(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "c.tape"
    streamtape.save(p, [openai_chat()])
    code, _, err = run_main("play", p, "--profile", "latency=scale:-1", capsys=capsys)
    assert code == 2
    assert err == ("streamtape: error: profile 'latency=scale:-1': bad item 'latency=scale:-1': "
                   "scale:F must be positive (or 0), not '-1'\n")


def test_a_record_option_error_names_the_flag_the_user_typed_not_the_mitmproxy_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_main("record", "-o", tmp_path / "nowhere" / "x.tape", "--upstream", "http://127.0.0.1:9",
                            "--listen", "127.0.0.1:0", capsys=capsys)
    assert code == 2 and "streamtape_out" not in err
    assert err.startswith(f"streamtape: error: -o/--out: {tmp_path / 'nowhere' / 'x.tape'}: folder ")


def _two_pairs(tmp_path: Path) -> tuple[Path, Path]:
    def ix(first_ms: int, q: str) -> streamtape.Interaction:
        return interaction([b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n', b"data: [DONE]\n\n"],
                           first_ns=first_ms * MS, body={"stream": True, "q": q})
    a, b = tmp_path / "a.tape", tmp_path / "b.tape"
    streamtape.save(a, [ix(10, "one"), ix(10, "two")])
    streamtape.save(b, [ix(10, "one"), ix(400, "two")])
    return a, b


def test_a_failed_per_pair_gate_is_named_in_the_pair_row_and_the_result(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a, b = _two_pairs(tmp_path)
    code, out, _ = run_main("diff", a, b, "--fail-on", "ttft>3x", capsys=capsys)
    assert code == 1
    assert "1 gate(s) failed: ttft>3x" in out  # the row of the slow pair
    assert "Result: " in out and "1 gate(s) failed (ttft>3x)" in out


def test_diff_html_says_where_it_wrote_the_page(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a, b = _two_pairs(tmp_path)
    page = tmp_path / "report.html"
    code, _, err = run_main("diff", a, b, "--html", page, capsys=capsys)
    assert page.exists() and f"streamtape: wrote the HTML report to {page}\n" in err
    assert code in (0, 1)


def test_profiles_profile_explains_each_item_in_the_words_of_the_syntax_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("profiles", "chunk=utf8-split;latency=scale:0.5;fault=keepalive:2;fault=cut:50%", capsys=capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0] == "chunk=utf8-split;latency=scale:0.5;fault=keepalive:2;fault=cut:50%"
    assert lines[1:5] == [
        "  chunk=utf8-split   recorded pieces, plus a cut inside every multi-byte UTF-8 character"
        " (an AWS event stream: inside its payloads, the messages as recorded)",
        "  latency=scale:0.5  recorded times multiplied by F",
        "  fault=keepalive:2  an SSE comment after every S seconds of silence (0: before every event)",
        "  fault=cut:50%      close before the body's end (see framing=) after P% / N bytes",
    ]
    assert lines[5].startswith("  framing=recorded   as recorded: chunked, Content-Length or close-delimited")
    assert lines[-1].startswith("  seed=0")
