"""Other tools' recordings in, and out: VCR.py cassettes, HAR 1.2, mitmproxy flow files.

``streamtape import`` reads the first three into a cassette, ``streamtape
export`` writes a cassette as HAR or as a VCR.py cassette. One module per
format (:mod:`.vcr`, :mod:`.har`, :mod:`.mitmflow`), what they share in
:mod:`.common`, detection, folders and whole-file writes in :mod:`.files`.

Only :mod:`.common` is imported here, so a replayer can ask
:func:`synthetic_timing` without loading mitmproxy's flow reader or PyYAML.
"""

from __future__ import annotations

from .common import SYNTHETIC_TIMING_NOTE, Imported, Source, synthetic_timing, timing_note

__all__ = ["SYNTHETIC_TIMING_NOTE", "Imported", "Source", "synthetic_timing", "timing_note"]
