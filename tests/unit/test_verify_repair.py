"""``streamtape verify`` and ``repair``, and what ``show`` says of damage and of old files."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

import streamtape
from tests.support import ROOT
from tests.support.damage import Recorded, record
from tests.support.recording import run_main


def damaged_copy(tmp_path: Path, rec: Recorded, which: int) -> Path:
    a, b = rec.spans[which]
    buf = bytearray(rec.data)
    buf[(a + b) // 2] ^= 0x20
    p = tmp_path / "damaged.tape"
    p.write_bytes(bytes(buf))
    return p


def test_verify_passes_a_whole_cassette_and_exits_1_naming_byte_and_interaction_of_a_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = record(tmp_path / "r.tape", 4)
    code, out, _ = run_main("verify", tmp_path / "r.tape", capsys=capsys)
    assert code == 0 and out == f"{tmp_path / 'r.tape'}: ok: 12 records of 4 interactions check out\n"
    p = damaged_copy(tmp_path, rec, 2)
    code, out, _ = run_main("verify", p, capsys=capsys)
    first, last = out.splitlines()
    assert code == 1
    assert first == f"{p}: damaged record at byte {rec.spans[2][0]} (374 bytes): record fails its checksum; left out interaction #2"
    assert last.startswith(f"{p}: DAMAGED: 1 damaged stretch(es), 1 interaction(s) left out, 3 read back whole")


def test_repair_writes_what_survives_to_a_new_file_that_verifies_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = record(tmp_path / "r.tape", 4)
    p = damaged_copy(tmp_path, rec, 1)
    out_path = tmp_path / "repaired.tape"
    code, out, _ = run_main("repair", p, "-o", out_path, capsys=capsys)
    assert code == 0 and out.startswith(f"wrote 3 interaction(s) to {out_path}; left out 1\n  damaged record at byte")
    repaired = streamtape.load(out_path, verify=True)
    assert list(repaired) == [rec.interactions[k] for k in (0, 2, 3)] and repaired.damage == []
    assert run_main("verify", out_path, capsys=capsys)[0] == 0
    code, _, err = run_main("repair", p, "-o", out_path, capsys=capsys)
    assert code == 2 and err == (f"streamtape: error: -o {out_path}: the file exists; repair writes a new "
                                 "cassette, give another name\n")


def test_repair_rewrites_an_old_cassette_with_checksums_and_verify_says_an_old_one_cannot_be_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = ROOT / "cassettes" / "test-server.tape"
    assert streamtape.load(old).header["version"] == 1
    code, out, _ = run_main("verify", old, capsys=capsys)
    assert code == 0 and "format version 1 has no record checksums" in out
    new = tmp_path / "new.tape"
    assert run_main("repair", old, "-o", new, capsys=capsys)[0] == 0
    assert streamtape.load(new).header["version"] == 4 and list(streamtape.load(new)) == list(streamtape.load(old))


def test_show_prints_one_warning_line_for_damage_and_a_note_once_for_an_old_cassette(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = record(tmp_path / "r.tape", 4)
    p = damaged_copy(tmp_path, rec, 0)
    code, out, err = run_main("show", p, capsys=capsys)
    assert code == 0 and len(out.splitlines()) == 1 + 3  # the header row and the three that survive
    assert err.splitlines() == [
        f"streamtape: warning: {p}: 1 damaged record(s) skipped, first at byte {rec.spans[0][0]}; "
        f"left out 1 interaction(s) (#0 at byte {rec.spans[0][0]}); 'streamtape verify' lists them"]
    code, _, err = run_main("show", ROOT / "cassettes" / "test-server.tape", capsys=capsys)
    assert code == 0 and err.count("no checksums") == 1
    code, _, err = run_main("show", tmp_path / "r.tape", capsys=capsys)
    assert err == ""


def _show_on_a_terminal(*args: str, columns: int) -> str:
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50"}
    proc = subprocess.Popen([sys.executable, "-m", "streamtape.cli", "show", *args],
                            stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_show_i_cuts_each_piece_to_the_terminal_and_full_prints_every_byte(tmp_path: Path) -> None:
    p = tmp_path / "long.tape"
    long = b'data: {"text":"' + b"x" * 300 + b'"}\n\n'
    from tests.support.builders import interaction

    streamtape.save(p, [interaction([long, b"data: [DONE]\n\n"])])
    out = _show_on_a_terminal(str(p), "-i", "0", columns=80)
    rows = [line for line in out.splitlines() if line.rstrip().endswith("…") or "[DONE]" in line]
    assert len(rows) == 2
    cut = next(r for r in rows if r.endswith("…"))
    assert len(cut) == 80 and cut.endswith('xxxx…')
    whole = _show_on_a_terminal(str(p), "-i", "0", "--full", columns=80)
    assert "x" * 300 + '"}\\n\\n' in whole
    # Not a terminal (a pipe, a file): every byte, as before.
    piped = subprocess.run([sys.executable, "-m", "streamtape.cli", "show", str(p), "-i", "0"],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "80"})
    assert "x" * 300 in piped.stdout
