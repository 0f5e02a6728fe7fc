"""``streamtape play`` and ``streamtape profiles`` as a user runs them, a process of their own:
the answer on stdout in real time, the summary line on stderr, raw bytes exactly. The plan,
its timing and the command in-process are tests/unit/test_play.py."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import streamtape
from streamtape.commands.profiles import listing
from streamtape.profiles import ADVERSARIAL, PRESETS
from tests.support import ROOT
from tests.support.streams import binary, openai_chat


def main(capsysbinary: pytest.CaptureFixture[bytes], *args: str) -> tuple[int, bytes, str]:
    """Run the CLI entry point in-process: (exit status, stdout bytes, stderr text)."""
    from streamtape.cli import main as cli_main

    with pytest.raises(SystemExit) as e:
        cli_main(list(args))
    out, err = capsysbinary.readouterr()
    code = e.value.code
    assert code is None or isinstance(code, int), code
    return code or 0, out, err.decode()


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    """A chat answer, a binary body and a recorded cut (-i 0, 1, 2)."""
    path = tmp_path / "play.tape"
    streamtape.save(path, [openai_chat(), binary(), openai_chat(outcome="upstream_closed", words=("half", " an answ"))])
    return path


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "streamtape.cli", *args], capture_output=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_play_cli_writes_the_answer_then_one_summary_line(cassette: Path):
    r = cli("play", str(cassette), "--profile", "instant")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "Héllo wörld!\n"
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("#0 POST /v1/chat/completions 200 (openai-chat) profile instant: 6 pieces")
    assert lines[0].endswith("ended cleanly")


def test_play_cli_raw_writes_exactly_the_recorded_bytes(cassette: Path):
    r = cli("play", str(cassette), "-i", "1", "--raw", "--profile", "instant")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"\x00\x01plain bytes\xff"


def test_play_cli_reports_a_recorded_cut(cassette: Path):
    r = cli("play", str(cassette), "-i", "2", "--profile", "instant")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "half an answ\n"
    assert r.stderr.decode().rstrip().endswith("cut (no clean end)")


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
