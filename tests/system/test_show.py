"""``streamtape show``: the listing, one interaction's timeline, JSON, and bad input."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import msgpack
import pytest

import streamtape
from streamtape import Interaction, Piece, Request, Response
from streamtape.cassette.model import Outcome
from streamtape.commands._render import escape_piece
from tests.support.processes import STREAMTAPE

EURO = "€".encode()


@pytest.fixture
def tape(tmp_path: Path) -> Path:
    pieces = (
        Piece(2_000_000, b"data: {\"t\":\"5" + EURO[:2]),
        Piece(12_500_000, EURO[2:] + b"\"}\r\n\r\n"),
        Piece(40_000_000, b": keep-alive\n\n"),
    )
    ix = Interaction(
        Request("POST", "http://127.0.0.1:8080/v1/chat/completions", body=b"{}"),
        Response(200, "OK", headers=(("Content-Type", "text/event-stream"),), pieces=pieces, headers_at_ns=1_000_000),
        end_ns=41_000_000,
        labels={"backend": "llama.cpp"},
    )
    cut = Interaction(
        Request("GET", "http://127.0.0.1:8080/api/chat?x=1"),
        Response(200, pieces=(Piece(3_000_000, b"\xff\xfe"),)),
        outcome=Outcome.UPSTREAM_CLOSED,
        error="incomplete chunked read",
        end_ns=5_000_000,
    )
    p = tmp_path / "s.tape"
    streamtape.save(p, [ix, cut])
    return p


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STREAMTAPE, *args], capture_output=True, text=True, timeout=60)


def test_listing_shows_one_row_per_interaction_with_its_figures(tape: Path) -> None:
    p = run("show", str(tape))
    assert p.returncode == 0, p.stderr
    header, first, second = p.stdout.strip().splitlines()
    assert header.split()[:4] == ["#", "method", "path", "status"]
    assert first.split() == ["0", "POST", "/v1/chat/completions", "200", "3", "36", "B", "2.0", "41.0", "complete", "backend=llama.cpp"]
    assert second.split() == ["1", "GET", "/api/chat?x=1", "200", "1", "2", "B", "3.0", "5.0", "upstream_closed"]


def test_timeline_escapes_line_endings_and_a_character_cut_between_pieces(tape: Path) -> None:
    p = run("show", str(tape), "-i", "0")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    rows = lines[lines.index(next(line for line in lines if line.strip().startswith("offset ms"))) + 1 :]
    assert len(rows) == 3
    assert rows[0].split()[:3] == ["2.000", "2.000", "15"]
    assert rows[0].endswith('data: {"t":"5\\xe2\\x82')
    assert rows[1].split()[:3] == ["12.500", "10.500", "7"]
    assert rows[1].endswith('\\xac"}\\r\\n\\r\\n')
    assert rows[2].endswith(": keep-alive\\n\\n")
    assert "labels: backend=llama.cpp" in p.stdout


def test_json_gives_utf8_text_where_valid_and_base64_otherwise(tape: Path) -> None:
    doc = json.loads(run("show", str(tape), "-i", "0", "--json").stdout)
    pieces = doc["timeline"]
    assert [pc["size"] for pc in pieces] == [15, 7, 14]
    assert base64.b64decode(pieces[0]["base64"]) == b"data: {\"t\":\"5" + EURO[:2]
    assert pieces[2]["text"] == ": keep-alive\n\n"
    assert pieces[1]["offset_ms"] == 12.5 and pieces[1]["gap_ms"] == 10.5
    assert doc["response"]["status"] == 200 and doc["labels"] == {"backend": "llama.cpp"}
    listing = json.loads(run("show", str(tape), "--json").stdout)
    assert [row["outcome"] for row in listing] == ["complete", "upstream_closed"]
    assert listing[1]["error"] == "incomplete chunked read"


def test_escape_piece_keeps_whole_characters_and_shows_controls() -> None:
    assert escape_piece("日本\tx\x00".encode()) == "日本\\tx\\x00"
    assert escape_piece(b"\xe6\x97") == "\\xe6\\x97"


def test_a_torn_cassette_still_shows_with_a_warning(tape: Path) -> None:
    tape.write_bytes(tape.read_bytes()[:-3])
    p = run("show", str(tape))
    assert p.returncode == 0
    assert "warning" in p.stderr and "torn last record" in p.stderr
    assert "interrupted" in p.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such cassette file"),
        (b"not msgpack at all", "not a streamtape cassette"),
        (msgpack.packb({"format": "streamtape", "version": 99}), "format version 99 is newer"),
        (msgpack.packb({"format": "streamtape", "version": 1}) + msgpack.packb(["d", 3, b"", [], []]), "corrupt cassette"),
    ],
)
def test_bad_cassettes_give_one_line_and_exit_2(tmp_path: Path, content: bytes | None, message: str) -> None:
    p = tmp_path / "bad.tape"
    if content is not None:
        p.write_bytes(content)
    r = run("show", str(p))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert message in r.stderr and str(p) in r.stderr
    assert r.stdout == ""


def test_bad_index_and_bad_option_give_one_line_and_exit_2(tape: Path) -> None:
    r = run("show", str(tape), "-i", "7")
    assert r.returncode == 2 and "no interaction 7 (the cassette has 2: 0..1)" in r.stderr
    r = run("show", str(tape), "-i", "x")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    r = run("show", str(tape), "--colour")
    assert r.returncode == 2 and "No such option" in r.stderr and len(r.stderr.strip().splitlines()) == 1
