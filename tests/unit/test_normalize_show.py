"""``streamtape show -i N``: stats, ``--events`` (normalized timeline), ``--text``, ``--shape``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import streamtape
from tests.corpus import capture
from tests.support.recording import run_main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_main(*argv, capsys=capsys)


@pytest.fixture
def tape(tmp_path: Path) -> Path:
    p = tmp_path / "llama.tape"
    streamtape.save(p, [capture("chat_stream_usage_slow"), capture("native_stopword_tiny")])
    return p


def test_show_prints_shape_and_stats_before_the_piece_timeline(tape, capsys):
    code, out, _ = run(["show", str(tape), "-i", "0"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert "shape: openai-chat (sse)  finish: length  done: yes" in lines
    stats = next(x for x in lines if x.startswith("ttfb "))
    assert stats.startswith("ttfb 15.4 ms  ttft 15.4 ms  gaps p50 9.8 / p95 28.6 / max 37.5 ms")
    assert "tokens 30  tokens/s 104.5" in out
    assert lines.index(stats) < lines.index(next(x for x in lines if "offset ms" in x))


def test_show_events_prints_the_normalized_timeline(tape, capsys):
    code, out, _ = run(["show", str(tape), "-i", "0", "--events"], capsys)
    assert code == 0
    lines = out.splitlines()
    rows = lines[lines.index(next(x for x in lines if x.strip().startswith("offset ms"))) + 1:]
    assert rows[0].split() == ["15.379", "0", "start", "role=assistant"]
    assert rows[1].split(None, 3) == ["15.379", "1", "text", '" Hello"']
    assert rows[-3].split()[2:] == ["finish", "length"]
    assert rows[-2].split()[2:] == ["usage", "prompt=24", "completion=30"]
    assert rows[-1].split()[2:] == ["done"]
    assert '"日"' in out


def test_show_text_prints_the_answer_only(tape, capsys):
    code, out, _ = run(["show", str(tape), "-i", "0", "--text"], capsys)
    assert code == 0
    assert out == " Hello, world! Smile 日 and say hi! Smile 😀 and say hi! Smile 日 and say\n"


def test_show_json_carries_analysis_stats_events_and_text(tape, capsys):
    code, out, _ = run(["show", str(tape), "-i", "1", "--json", "--events", "--text"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["analysis"]["shape"] == "llamacpp"
    assert doc["analysis"]["finish"] == {"reason": "stop", "raw": "word"}
    assert doc["stats"]["tokens"] == 3 and doc["stats"]["pieces"] == 4
    assert doc["events"][-1]["kind"] == "done" and doc["text"] == ", "
    assert "timeline" in doc  # the existing output is kept


def test_show_shape_override_and_errors(tape, capsys):
    code, out, _ = run(["show", str(tape), "-i", "0", "--events", "--shape", "sse"], capsys)
    assert code == 0 and "shape: sse (sse)" in out
    code, _, err = run(["show", str(tape), "-i", "0", "--shape", "nope"], capsys)
    assert code == 2 and "unknown shape 'nope'" in err
    code, _, err = run(["show", str(tape), "--events"], capsys)
    assert code == 2 and "add -i N" in err
