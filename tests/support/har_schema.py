"""HAR 1.2 as a JSON Schema, for checking what ``streamtape export --har`` writes.

Written from the specification (Jan Odvarko, "HAR 1.2 Spec", the W3C Web
Performance working group draft of it) and tightened where Chromium's devtools
importer is stricter (``front_end/models/har/HARFormat.ts``: ``log.entries``
must be an array; ``time``, ``headersSize``, ``bodySize``, ``status``,
``content.size`` and ``timings.send/wait/receive`` must be numbers; dates must
parse; ``creator``, ``request``, ``response``, ``content`` and ``timings`` must
be objects). Every object is closed to fields outside the spec except custom
ones, whose names start with an underscore.

``DATE_TIME`` is the ISO 8601 form the spec asks for (with a time zone);
``check`` validates a document and also checks the one rule a schema cannot
say: an entry's ``time`` is the sum of its non-negative timings.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import jsonschema

DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def _obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "required": sorted(required),
        "properties": {**required, **(optional or {}), "comment": {"type": "string"}},
        "patternProperties": {"^_": {}},
        "additionalProperties": False,
    }


STRING = {"type": "string"}
INT = {"type": "integer"}
SIZE = {"type": "integer", "minimum": -1}
DATE = {"type": "string", "format": "har-date-time"}
PAIRS = {"type": "array", "items": _obj({"name": STRING, "value": STRING})}
COOKIES = {
    "type": "array",
    "items": _obj(
        {"name": STRING, "value": STRING},
        {"path": STRING, "domain": STRING, "expires": {"type": ["string", "null"]},
         "httpOnly": {"type": "boolean"}, "secure": {"type": "boolean"}},
    ),
}
CACHE_ENTRY = {
    "oneOf": [
        {"type": "null"},
        _obj({"lastAccess": DATE, "eTag": STRING, "hitCount": INT}, {"expires": DATE}),
    ]
}
TIMING = {"type": "number", "minimum": -1}
MEASURED = {"type": "number", "minimum": 0}

SCHEMA: dict[str, Any] = _obj({
    "log": _obj(
        {
            "version": STRING,
            "creator": _obj({"name": STRING, "version": STRING}),
            "entries": {
                "type": "array",
                "items": _obj(
                    {
                        "startedDateTime": DATE,
                        "time": MEASURED,
                        "request": _obj(
                            {
                                "method": STRING, "url": STRING, "httpVersion": STRING,
                                "cookies": COOKIES, "headers": PAIRS, "queryString": PAIRS,
                                "headersSize": SIZE, "bodySize": SIZE,
                            },
                            {
                                "postData": _obj(
                                    {"mimeType": STRING},
                                    {"text": STRING, "params": {"type": "array", "items": _obj(
                                        {"name": STRING},
                                        {"value": STRING, "fileName": STRING, "contentType": STRING})}},
                                ),
                            },
                        ),
                        "response": _obj(
                            {
                                "status": INT, "statusText": STRING, "httpVersion": STRING,
                                "cookies": COOKIES, "headers": PAIRS,
                                "content": _obj(
                                    {"size": INT, "mimeType": STRING},
                                    {"compression": INT, "text": STRING, "encoding": STRING},
                                ),
                                "redirectURL": STRING, "headersSize": SIZE, "bodySize": SIZE,
                            }
                        ),
                        "cache": _obj({}, {"beforeRequest": CACHE_ENTRY, "afterRequest": CACHE_ENTRY}),
                        "timings": _obj(
                            {"send": MEASURED, "wait": MEASURED, "receive": MEASURED},
                            {"blocked": TIMING, "dns": TIMING, "connect": TIMING, "ssl": TIMING},
                        ),
                    },
                    {"pageref": STRING, "serverIPAddress": STRING, "connection": STRING},
                ),
            },
        },
        {
            "browser": _obj({"name": STRING, "version": STRING}),
            "pages": {"type": "array", "items": _obj(
                {"startedDateTime": DATE, "id": STRING, "title": STRING,
                 "pageTimings": _obj({}, {"onContentLoad": TIMING, "onLoad": TIMING})})},
        },
    )
})

_formats = jsonschema.FormatChecker()


def _date_time(value: object) -> bool:
    if not isinstance(value, str) or not DATE_TIME.match(value):
        return False
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


_formats.checks("har-date-time", raises=ValueError)(_date_time)

def check(doc: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` (or AssertionError) unless ``doc`` is valid HAR 1.2."""
    jsonschema.Draft202012Validator(SCHEMA, format_checker=_formats).validate(doc)
    assert doc["log"]["version"] == "1.2"
    for n, entry in enumerate(doc["log"]["entries"]):
        # HAR 1.2: "ssl ... is also included in the connect field", so it is not added again.
        parts = [v for k, v in entry["timings"].items()
                 if not k.startswith("_") and k not in ("comment", "ssl") and v >= 0]
        assert abs(entry["time"] - sum(parts)) < 1e-6, f"entry {n}: time is not the sum of its timings"
        content = entry["response"]["content"]
        if content.get("encoding") not in (None, "base64"):
            raise AssertionError(f"entry {n}: unknown content.encoding {content['encoding']!r}")
