"""``streamtape check`` as a user runs it, a process of its own: findings at the gate exit 1. The checks and
the command in-process are tests/unit/test_check.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import streamtape
from tests.corpus import capture


def test_check_console_script_exit_status(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tape"
    streamtape.save(bad, [capture("chat_limit_tiny")])  # llama-server cut by max_tokens
    r = subprocess.run([sys.executable, "-m", "streamtape.cli", "check", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "warning: finish-length" in r.stdout  # a normal stop passes CI
    r = subprocess.run([sys.executable, "-m", "streamtape.cli", "check", "--fail-on", "warning", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "finish-length" in r.stdout
