"""Fixtures that more than one test module uses.

tests/unit holds the pure, fast tests (no subprocess, no socket server, no real proxy: run
them alone with ``pytest tests/unit``); tests/system the ones that start processes, real
servers, mitmproxy, SDK clients, Chromium or llama.cpp. What they share lives in the
tests/support package (its ``__init__`` says what each module holds): the values the tests
build and ``wait_until`` (builders.py), real peers (servers.py, ws_upstream.py, ...), the
process launcher (processes.py) and ``streamtape record`` (recording.py). Test modules import
those helpers explicitly and never each other.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.support.diff_backends import record_each

HAS_HTTPX2 = importlib.util.find_spec("httpx2") is not None
NEEDS_HTTPX2 = (
    "needs httpx2, the HTTP client of the current openai and anthropic SDKs; the test extra leaves "
    "them out on Python 3.11, whose mitmproxy 11 pins h11 < 0.15 while httpx2 needs h11 0.16 "
    "(to run it: a Python 3.12+ environment, python3.12 -m venv .venv && .venv/bin/pip install -e '.[test]')"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"httpx2: the test {NEEDS_HTTPX2} (skipped where it is not installed)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``httpx2``-marked tests, with the reason, where httpx2 is not installed (Python 3.11)."""
    if HAS_HTTPX2:
        return
    skip = pytest.mark.skip(reason=NEEDS_HTTPX2)
    for item in items:
        if item.get_closest_marker("httpx2"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every diff scenario (tests/support/diff_backends.py) recorded once through ``streamtape record``,
    one cassette each, by name: shared by the text, JSON and HTML diff tests."""
    return record_each(tmp_path_factory.mktemp("diff"))
