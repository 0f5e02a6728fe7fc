"""Headless Chromium for the tests that open a page the way a person would.

One place for the binary lookup, the skip marker and the flags: as root on a
machine with no network, Chromium needs ``--no-sandbox`` and the
background-networking switches off, or it hangs on connections this machine
refuses. ``.ci/run`` installs Debian's chromium.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = ROOT / "test-artifacts"
"""Screenshots land here, for a person to look at after a run."""

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium); .ci/run installs it",
)

QUIET_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def chromium(page: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Open ``page`` in headless Chromium with ``extra`` switches (``--dump-dom``, ``--screenshot=``)."""
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", *QUIET_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *extra, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
