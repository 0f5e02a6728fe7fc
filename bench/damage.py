"""What random damage costs: interactions recovered from a recorded cassette after N
single-bit flips, in format 4 (checksummed frames) beside the same recording in format 1
(bare records, the baseline), measured in one run.

    .venv/bin/python -m bench.damage [--interactions 1000] [--flips 30] [--trials 20]

The cassette is recorded the way ``streamtape record`` writes one (the Recorder
into a BackgroundWriter, one data record per piece batch); the format 1 copy
holds the same records unframed. Each trial flips ``--flips`` random bits past
the header of both copies at the same record positions and loads them: an
interaction counts as *recovered* when it loads byte-identical, *reported* when
the reader names it as left out, *silent* when it loads changed or vanishes
unreported (the failure the format exists to rule out). A file that refuses to
load recovers nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path

import msgpack

import streamtape
from streamtape.cassette.reader import read_records
from streamtape.errors import CassetteError
from tests.support.damage import judge, record


def _format1_copy(src: Path, dst: Path) -> list[tuple[int, int]]:
    """The records of ``src`` written bare under a version 1 header; each record's byte range."""
    header, records, _, _ = read_records(src)
    out = bytearray(msgpack.packb({**header, "version": 1}, use_bin_type=True))
    spans = []
    for rec in records:
        blob = msgpack.packb(rec, use_bin_type=True)
        spans.append((len(out), len(out) + len(blob)))
        out += blob
    dst.write_bytes(bytes(out))
    return spans


def _flip(data: bytes, start: int, rng: random.Random, n: int) -> bytes:
    buf = bytearray(data)
    for _ in range(n):
        buf[rng.randrange(start, len(buf))] ^= 1 << rng.randrange(8)
    return bytes(buf)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.damage", description=__doc__.splitlines()[0])
    ap.add_argument("--interactions", type=int, default=1000)
    ap.add_argument("--flips", type=int, default=30)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=24)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    rec = record(tmp / "v4.tape", a.interactions)
    v1 = tmp / "v1.tape"
    _format1_copy(tmp / "v4.tape", v1)
    v1_data = v1.read_bytes()
    v1_start = len(msgpack.packb(read_records(v1)[0], use_bin_type=True))
    want = rec.interactions
    rng = random.Random(a.seed)
    got4, got1, silent4, silent1, refused1 = [], [], 0, 0, 0
    for _ in range(a.trials):
        seed = rng.randrange(1 << 30)
        p4 = tmp / "t4.tape"
        p4.write_bytes(_flip(rec.data, rec.header_end, random.Random(seed), a.flips))
        v = judge(p4, rec)
        got4.append(len(v.loaded))
        silent4 += len(v.problems)
        p1 = tmp / "t1.tape"
        p1.write_bytes(_flip(v1_data, v1_start, random.Random(seed), a.flips))
        try:
            loaded = list(streamtape.load(p1))
            same = sum(ix == w for ix, w in zip(loaded, want, strict=False))
            got1.append(same)
            silent1 += len(want) - same  # format 1 has no way to say which ones changed
        except CassetteError:
            got1.append(0)
            refused1 += 1
    n = a.interactions
    m4, m1 = statistics.median(got4), statistics.median(got1)
    print(f"{a.trials} trials of {a.flips} random bit flips in a recorded cassette of {n} interactions "
          f"({len(rec.data)} bytes)")
    print(f"{'format':<22} {'recovered (median)':>19} {'min':>6} {'max':>6} {'silent':>7} {'file refused':>13}")
    print(f"{'4 (checksummed)':<22} {m4:>19.0f} {min(got4):>6} {max(got4):>6} {silent4:>7} {0:>13}")
    print(f"{'1 (bare, baseline)':<22} {m1:>19.0f} {min(got1):>6} {max(got1):>6} {silent1:>7} {refused1:>13}")
    print(f"format 4 recovers {m4 / n:.1%} of the interactions, every loss reported; format 1 {m1 / n:.1%}, "
          f"its losses unreported or the whole file refused")


if __name__ == "__main__":
    main()
