"""A large indexed cassette served for real: the in-process replay server over a socket and
``streamtape serve`` answer from the index without holding the cassette, and
``bench/cassette.py`` runs end to end on a small one. The index itself, lazy interactions
and compact pieces are tests/unit/test_cassette_index.py."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import streamtape
from streamtape.match.indexed import IndexedMatcher
from streamtape.serve import ReplayServer
from tests.support import ROOT
from tests.support.processes import STREAMTAPE, start
from tests.support.streams import numbered, write


def test_a_replay_server_of_a_large_cassette_matches_without_holding_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import streamtape.match.indexed as mi

    monkeypatch.setattr(mi, "INDEXED_MATCH_MIN", 50)
    p = tmp_path / "big.tape"
    write(p, [numbered(k, pieces=3) for k in range(200)])
    cas = streamtape.load(p)
    with ReplayServer(cas, profile="instant") as srv:
        assert isinstance(srv.matcher, IndexedMatcher)
        want = numbered(137, pieces=3)
        req = urllib.request.Request(srv.url + "/v1/chat/completions", data=want.request.body, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.read() == want.response.body  # type: ignore[union-attr]
        bad = urllib.request.Request(srv.url + "/v1/chat/completions", data=b'{"model": "nope"}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(bad, timeout=10)
        assert e.value.code == 422 and b"closest is big.tape#" in e.value.read()  # the cassette file, named
    assert srv.matcher.used[137] == 1 and sum(srv.matcher.used) == 1


@pytest.mark.slow
def test_streamtape_serve_answers_from_an_indexed_cassette_of_6000_interactions(tmp_path: Path) -> None:
    p = tmp_path / "many.tape"
    write(p, [numbered(k, pieces=2) for k in range(6000)])
    with start([*STREAMTAPE, "serve", str(p), "--port", "0", "--profile", "instant"], r"on http://(\S+)") as proc:
        for k in (0, 5999, 3000):
            want = numbered(k, pieces=2)
            req = urllib.request.Request(proc.url + "/v1/chat/completions", data=want.request.body, method="POST")
            with urllib.request.urlopen(req, timeout=30) as r:
                assert r.read() == want.response.body  # type: ignore[union-attr]


@pytest.mark.slow
def test_bench_cassette_runs_on_a_small_cassette(tmp_path: Path) -> None:
    """``python -m bench.cassette`` end to end on a 2 MiB cassette (its figures are not checked here)."""
    r = subprocess.run(
        [sys.executable, "-m", "bench.cassette", "--size-mib", "2", "--baseline-mib", "1",
         "--runs", "1", "--dir", str(tmp_path), "--no-old"],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    for word in ("writer", "show (listing", "show -i", "serve", "load(", "without the index"):
        assert word in r.stdout, r.stdout
