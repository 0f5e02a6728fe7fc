"""``httpx.Client(transport=ReplayTransport(...))`` and its kin type-check under ``mypy --strict``.

The clients annotate ``transport=`` with their own nominal ``BaseTransport`` /
``AsyncBaseTransport``, which the replay transport does not derive from at
runtime (so that importing it imports neither httpx nor httpx2). Without its
typing-only bases every line of tests/typing/check_transport_types.py was an
error for a user running mypy (``Argument "transport" to "Client" has
incompatible type "ReplayTransport"; expected "BaseTransport | None"``): this
runs mypy over those files, as a user's CI would.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
CHECKS = ROOT / "tests" / "typing"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.httpx2,
    pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="needs mypy"),
]

CONTROL = '''\
from streamtape import ReplayTransport

not_a_transport: int = ReplayTransport([])
'''
"""A line that must fail: were ReplayTransport's bases Any to mypy (httpx2 not
found, say), it would be assignable to anything and the checks would pass for
nothing."""
CONTROL_ERROR = (
    'error: Incompatible types in assignment (expression has type "ReplayTransport", '
    'variable has type "int")  [assignment]'
)


def _check_files() -> list[Path]:
    files = [CHECKS / "check_transport_types.py"]
    if all(importlib.util.find_spec(sdk) is not None for sdk in ("openai", "anthropic")):
        files.append(CHECKS / "check_sdk_transport_types.py")
    return files


def test_the_documented_transport_uses_type_check_under_mypy_strict(tmp_path: Path) -> None:
    control = tmp_path / "control_transport_types.py"
    control.write_text(CONTROL, encoding="utf-8")
    files = _check_files()
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", *map(str, files), str(control)],
        capture_output=True,
        text=True,
        cwd=ROOT,  # streamtape as in this tree; the default .mypy_cache, shared with `mypy`
        timeout=600,
    )
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert run.returncode == 1, run.stdout + run.stderr
    # By name: mypy's cache may report an unchanged module under the path it had last run.
    checked = [line for line in lines if Path(line.split(":", 1)[0]).name != control.name]
    assert not checked, "\n".join(checked)
    assert [line.split(": ", 1)[1] for line in lines] == [CONTROL_ERROR], run.stdout
