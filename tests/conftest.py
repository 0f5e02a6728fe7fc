"""Fixtures that more than one test module uses.

Values the tests build (interactions, stream bodies, ``MS``) and ``wait_until``
live in tests/builders.py; real peers (scripted upstream servers, a raw client)
in tests/servers.py; running the CLI in tests/recording.py. Test modules import
those helpers and never each other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.diff_backends import record_each


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every diff scenario (tests/diff_backends.py) recorded once through ``streamtape record``,
    one cassette each, by name: shared by the text, JSON and HTML diff tests."""
    return record_each(tmp_path_factory.mktemp("diff"))
