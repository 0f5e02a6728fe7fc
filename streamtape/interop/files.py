"""Foreign files on disk: which format a file is, folders of them, and writing exports whole.

Detection looks at the content, not the name: a HAR is JSON with a ``log``,
a VCR.py cassette is YAML or JSON with ``interactions``, a mitmproxy flow
file is a tnetstring stream (``<length>:``). ``--from`` skips the guess.
A folder stands for every file in it, at any depth, with a suffix these tools
write (``tests/cassettes/`` as pytest-recording lays it out: one YAML file per
test), in name order.

Exports are written to a temporary file beside the target and renamed over
it, so a failed export never leaves half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..capture.redaction import Redaction
from ..cassette.records import FORMAT_NAME
from ..errors import InteropError
from . import har, mitmflow, vcr
from .common import Imported, Source

FOLDER_SUFFIXES = (".yaml", ".yml", ".json", ".har", ".flow", ".flows", ".mitm", ".dump")
"""What a folder's files must end with to be imported (a file named on its own may be anything)."""


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files to import: each file as given, each folder's matching files sorted."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in FOLDER_SUFFIXES)
            if not found:
                raise InteropError(p, f"folder holds no files to import ({', '.join(FOLDER_SUFFIXES)})")
            out.extend(found)
        else:
            out.append(p)
    return out


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InteropError(path, "no such file") from None
    except IsADirectoryError:
        raise InteropError(path, "is a directory") from None
    except OSError as e:
        raise InteropError(path, f"cannot read: {e.strerror or e}") from None


def detect(path: Path, data: bytes) -> Source:
    """The format of a file's content (raises :class:`InteropError` when it is none of them)."""
    if not data.strip():
        raise InteropError(path, "empty file")
    if data[:1] in (b"\x81", b"\x82", b"\x83", b"\x84", b"\x85") and FORMAT_NAME.encode() in data[:48]:
        raise InteropError(path, "is a streamtape cassette already (nothing to import)")
    if mitmflow.looks_like(data):
        return Source.MITM
    start = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if start == b"{":
        try:
            doc = json.loads(data.decode("utf-8-sig"))
        except ValueError:
            doc = None  # maybe flow-style YAML
        if har.looks_like(doc):
            return Source.HAR
        if vcr.looks_like(doc):
            return Source.VCR
        if isinstance(doc, dict):
            raise InteropError(
                path, "JSON, but neither a HAR (no 'log') nor a VCR.py cassette (no 'interactions')"
            )
    doc = vcr.parse(path, data)
    if vcr.looks_like(doc) or (isinstance(doc, list) and doc and isinstance(doc[0], dict) and "request" in doc[0]):
        return Source.VCR
    if har.looks_like(doc):
        return Source.HAR
    raise InteropError(
        path, "not a VCR.py cassette, HAR file or mitmproxy flow file (name the format with --from)"
    )


def read(
    path: Path,
    source: Source | None = None,
    *,
    redaction: Redaction | None = None,
    labels: Mapping[str, str] | None = None,
) -> Imported:
    """One foreign file as interactions. Raises :class:`InteropError` on anything malformed."""
    data = _read_bytes(path)
    fmt = source or detect(path, data)
    if fmt is Source.VCR:
        return vcr.read(path, data, redaction=redaction or Redaction(), labels=labels)
    if fmt is Source.HAR:
        return har.read(path, data, redaction=redaction or Redaction(), labels=labels)
    if not data:
        raise InteropError(path, "empty file, not a mitmproxy flow file")
    return mitmflow.read(path, redaction=redaction or Redaction(), labels=labels)


def write_text(path: Path, text: str) -> None:
    """Write a whole file or nothing: a temporary file beside ``path``, renamed over it."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InteropError(path, f"folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise InteropError(path, f"cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise InteropError(path, f"cannot write: {e.strerror or e}") from None
