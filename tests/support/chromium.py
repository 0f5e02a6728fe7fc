"""Headless Chromium for the tests that open a page the way a person would.

One place for the binary lookup, the skip marker and the flags: as root on a
machine with no network, Chromium needs ``--no-sandbox`` and the
background-networking switches off, or it hangs on connections this machine
refuses. ``.ci/run`` installs Debian's chromium.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


class DevToolsPipe:
    """Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
    commands on fd 3, replies on fd 4, each a JSON message ended by NUL). Events (messages
    without an ``id``) are kept in ``events`` in the order they came."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        def fds() -> None:
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", *QUIET_FLAGS, "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if "id" not in reply:
                    self.events.append(reply)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return dict(reply["result"])
            ready, _, _ = select.select([self._r], [], [], 0.2)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buf += chunk
        raise TimeoutError(f"chromium did not answer {method} in {timeout} s")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        os.close(self._w)
        os.close(self._r)


@dataclass(frozen=True)
class PageLoad:
    """What a page did as Chromium loaded it: console errors and warnings, uncaught exceptions,
    log entries of level error (a Content-Security-Policy violation is one), every request
    it made after the page itself, and the answers to the expressions asked of it."""

    console: list[str]
    exceptions: list[str]
    log_errors: list[str]
    requests: list[str]
    values: dict[str, Any]


def load_page(page: Path, profile: Path, expressions: dict[str, str] | None = None) -> PageLoad:
    """Open ``page`` in headless Chromium, wait for it to load (and a moment more for late
    requests), evaluate ``expressions`` in it (by name), and report what it did."""
    pipe = DevToolsPipe(profile)
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            pipe.call(f"{domain}.enable", {}, session)
        pipe.call("Page.navigate", {"url": page.as_uri()}, session)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = pipe.call("Runtime.evaluate", {"expression": "document.readyState", "returnByValue": True},
                              session)["result"].get("value")
            if state == "complete":
                break
            time.sleep(0.1)
        time.sleep(0.5)
        values = {}
        for name, expr in (expressions or {}).items():
            got = pipe.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session)
            values[name] = got["result"].get("value")
        ev = [e for e in pipe.events if e.get("sessionId") == session]
        console = [f"{e['params']['type']}: {e['params'].get('args')}" for e in ev
                   if e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "warning", "assert")]
        exceptions = [json.dumps(e["params"]["exceptionDetails"])[:500] for e in ev if e["method"] == "Runtime.exceptionThrown"]
        log_errors = [e["params"]["entry"].get("text", "") for e in ev
                      if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] in ("error", "warning")]
        requests = [e["params"]["request"]["url"] for e in ev if e["method"] == "Network.requestWillBeSent"]
        return PageLoad(console, exceptions, log_errors, [u for u in requests if u != page.as_uri()], values)
    finally:
        pipe.close()
