"""The example cassettes of ``cassettes/``: each loads whole, stays small, and has its
provenance in ``cassettes/README.md`` (the docs site includes that page)."""

from __future__ import annotations

import pytest

import streamtape
from streamtape.cassette.model import Outcome
from tests.support import ROOT

FOLDER = ROOT / "cassettes"
SHIPPED = sorted(FOLDER.glob("*.tape"))
README = (FOLDER / "README.md").read_text(encoding="utf-8")


def test_one_cassette_ships_per_shape_and_kind_of_session_the_docs_name() -> None:
    names = {p.name for p in SHIPPED}
    assert {"llama-cpp.tape", "test-server.tape", "ollama-chat.tape", "tool-call.tape", "reasoning.tape",
            "max-tokens.tape", "mid-stream-error.tape", "realtime.tape", "vcr-imported.tape"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_a_shipped_cassette_loads_is_small_and_is_described_with_its_re_record_command(path) -> None:
    cas = streamtape.load(path)
    assert len(cas) >= 1 and not cas.warnings
    assert all(ix.outcome == Outcome.COMPLETE for ix in cas)
    assert path.stat().st_size < 32 * 1024
    # Described in a section of its own, an item of a list, or a row of a section's table
    # (the hosted formats' table), beside its row in the table at the top.
    rows = README.count(f"| `{path.name}` |")
    assert f"## `{path.name}`" in README or f"- `{path.name}`" in README or rows >= 2, path.name
    assert rows >= 1  # in the table at the top
