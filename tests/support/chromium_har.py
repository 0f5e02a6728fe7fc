"""Chromium's own devtools HAR importer, run in headless Chromium, on a HAR file.

The devtools frontend ships inside Chromium (``devtools://devtools/bundled/``).
Its HAR import (what Network > Import HAR runs) is two modules:
``models/har/HARFormat.js`` checks and converts the JSON (it throws on a
missing ``log.entries``, a non-numeric size or time, an unparsable date) and
``models/har/Importer.js`` turns each entry into a ``NetworkRequest``, the
object the Network panel shows. This helper opens the bundled devtools page
in a headless Chromium driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: commands on fd 3, replies on fd 4, each a JSON
message ended by NUL), imports both modules there, and returns what the panel
would show for every request: method, URL, status, MIME type, when the
headers arrived, and the response body (``text``, or ``base64`` for what
the exporter wrote as base64).

Clicking through the panel's file dialog is not driven (a headless browser
has no dialog); the code behind it is.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.support.chromium import DevToolsPipe

_IMPORT = """(async () => {
  const HAR = await import('devtools://devtools/bundled/models/har/har.js');
  const root = new HAR.HARFormat.HARRoot(JSON.parse(%s));
  const requests = HAR.Importer.Importer.requestsFromHARLog(root.log);
  const out = [];
  for (const r of requests) {
    const data = await r.requestContentData();
    // ContentData holds text or base64 and refuses to convert either way; ask for both.
    let text = null, base64 = null;
    try { text = data.text; } catch (e) {}
    try { base64 = data.base64; } catch (e) {}
    out.push({method: r.requestMethod, url: r.url(), status: r.statusCode, mimeType: r.mimeType || null,
              headersEnd: r.timing ? r.timing.receiveHeadersEnd : null, text, base64,
              resourceType: r.resourceType().name(),
              frames: r.frames().map(f => [f.type, f.opCode, f.text])});
  }
  return JSON.stringify(out);
})()"""


def import_har(har_text: str, profile: Path) -> list[dict[str, Any]]:
    """What Chromium's devtools HAR importer makes of ``har_text``, one dict per request.

    Raises RuntimeError with the importer's message when it refuses the file.
    """
    pipe = DevToolsPipe(profile)
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        pipe.call("Page.navigate", {"url": "devtools://devtools/bundled/devtools_app.html"}, session)
        deadline = time.monotonic() + 60
        while True:
            state = pipe.call("Runtime.evaluate", {"expression": "document.readyState", "returnByValue": True},
                              session)["result"].get("value")
            if state == "complete" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        got = pipe.call(
            "Runtime.evaluate",
            {"expression": _IMPORT % json.dumps(har_text), "awaitPromise": True, "returnByValue": True},
            session,
        )
        if "exceptionDetails" in got:
            details = got["exceptionDetails"]
            raise RuntimeError(details.get("exception", {}).get("description") or details.get("text"))
        return list(json.loads(got["result"]["value"]))
    finally:
        pipe.close()
