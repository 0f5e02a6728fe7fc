"""HAR 1.2 (HTTP Archive): read what browsers' devtools and mitmproxy write; write what they open.

Reading. An entry's ``request`` and ``response`` become the interaction;
``content.text`` is the decoded body (the spec's rule; ``encoding: base64``
when it is binary), so a ``Content-Encoding`` header beside it is dropped
(:func:`~streamtape.interop.common.settle_coding`). Chromium's pseudo-headers
(``:authority``...) are not headers and are left out. The timeline: t = 0 is
when the request was sent, the head arrives at ``time - receive``, and the
whole body is one piece at ``time`` (the entry's total). An entry with
status 0 got no response (mitmproxy writes that for a failed flow). Fields
whose names start with ``_`` are other tools' extensions and are ignored, all
but streamtape's own.

Writing. Every field HAR 1.2 requires is there, with the values Chromium's
importer (``front_end/models/har/HARFormat.ts``) and mitmproxy's reader
(``mitmproxy.io.har``) parse: numbers as numbers, ``-1`` for what is unknown,
ISO 8601 dates. The body goes in ``content.text`` decoded, as the spec says,
and what HAR cannot say goes in an ``_streamtape`` extension on each entry::

    "_streamtape": {
      "version": 1,
      "pieces": [[offset_ns, size], ...],   every piece of the body as it arrived
      "body": "<base64>",                   the bytes as sent, when content.text is not
                                            them (a gzip body); absent otherwise
      "request_body": "<base64>",           when postData.text cannot hold the request
                                            body (not UTF-8); absent otherwise
      "framing": "chunked", "headers_at_ns": 1200000, "end_ns": 315700000,
      "outcome": "complete", "error": null, "started_at": 1764500000.123456,
      "labels": {"backend": "llama.cpp"},
      "setup": {"wait_ns": 0, "tcp_ns": 900000, "tls_ns": 81000000},
                                            the upstream connection's setup (absent when
                                            none was recorded); HAR's own timings.connect
                                            and timings.ssl say it in milliseconds
      "websocket": {"messages": [[offset_ns, "client"|"server", text, "<base64>"], ...],
                    "close": {"code": 1000, "reason": "", "by": "client"}}
                                            a WebSocket session (absent for HTTP); its
                                            messages also go in Chromium's own
                                            ``_webSocketMessages`` list, which devtools shows
    }

so importing an exported HAR gives every interaction back exactly: pieces,
offsets, outcome and labels.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from mitmproxy.net.http.headers import infer_content_encoding

from .._version import __version__
from ..capture.redaction import Redaction
from ..cassette.model import (
    Direction,
    Headers,
    Interaction,
    Message,
    Outcome,
    Request,
    Response,
    WebSocketSession,
)
from ..cassette.pieces import Piece
from ..cassette.records import decode_close, decode_setup, encode_close, encode_setup
from ..errors import InteropError
from ..wire import header_value, request_head, status_head
from .common import (
    Imported,
    Malformed,
    Notes,
    Source,
    content_coding,
    decode_body,
    http_version,
    imported,
    ns,
    one_piece_response,
    redacted,
    settle_coding,
)

EXTENSION = "_streamtape"
EXTENSION_VERSION = 1
HAR_VERSION = "1.2"


def parse(path: Path, data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise InteropError(path, "not a HAR file (not UTF-8 text)") from None
    except ValueError as e:
        raise InteropError(path, f"not a HAR file (not JSON: {e})") from None


def looks_like(doc: Any) -> bool:
    return isinstance(doc, dict) and "log" in doc


# --------------------------------------------------------------------------
# Reading



def read(
    path: Path, data: bytes, *, redaction: Redaction, labels: Mapping[str, str] | None = None
) -> Imported:
    """The entries of a HAR file, in file order."""
    doc = parse(path, data)
    log = doc.get("log") if isinstance(doc, dict) else None
    if not isinstance(log, dict):
        raise InteropError(path, "not a HAR file (no 'log' object)")
    entries = log.get("entries")
    if not isinstance(entries, list):
        raise InteropError(path, "not a HAR file (no log.entries list)")
    creator = log.get("creator")
    creator_name = str(creator.get("name") or "") if isinstance(creator, dict) else ""
    notes = Notes()
    out: list[Interaction] = []
    synthetic = 0
    for n, entry in enumerate(entries):
        try:
            if not isinstance(entry, dict):
                raise Malformed("not an object")
            ext = entry.get(EXTENSION)
            if ext is not None:
                out.append(_exact(entry, ext, redaction))
            else:
                out.append(_entry(entry, n, creator_name, notes, redaction, dict(labels or {})))
                synthetic += 1
        except Malformed as e:
            raise InteropError(path, f"entry {n}: {e}") from None
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as e:
            detail = f"no {e}" if isinstance(e, KeyError) else str(e)
            raise InteropError(path, f"entry {n}: malformed ({detail})") from None
    return Imported(Source.HAR, tuple(out), tuple(f"{path}: {line}" for line in notes.lines), synthetic)


def _har_headers(raw: Any) -> Headers:
    """HAR headers: ``{"name", "value"}`` objects (every browser) or ``[name, value]`` pairs (Slack)."""
    out: list[tuple[str, str]] = []
    for h in raw or ():
        name, value = (h["name"], h["value"]) if isinstance(h, dict) else (h[0], h[1])
        if str(name).startswith(":"):
            continue  # an HTTP/2 pseudo-header, not a header
        out.append((str(name), str(value)))
    return tuple(out)


def _started(entry: dict[str, Any]) -> float:
    raw = entry.get("startedDateTime")
    if raw is None:
        return 0.0
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise Malformed(f"startedDateTime {raw!r} is not an ISO 8601 date") from None


def _encode(text: str, headers: Headers, mime: str, creator: str) -> bytes:
    """HAR text back to the bytes it was decoded from.

    The charset the Content-Type names, else the one the writer assumed:
    mitmproxy decodes with its ``infer_content_encoding`` (latin-1 for a
    ``text/event-stream`` without a charset, UTF-8 for JSON), browsers with
    UTF-8. Text that charset cannot hold was decoded as UTF-8 with surrogate
    escapes (mitmproxy's fallback) and goes back the same way.
    """
    ctype = header_value(headers, "content-type") or mime or ""
    charset = "utf-8"
    for part in ctype.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
            break
    else:
        if creator == "mitmproxy":
            charset = infer_content_encoding(ctype)
    try:
        codecs.lookup(charset)
        return text.encode(charset)
    except (LookupError, UnicodeEncodeError):
        return text.encode("utf-8", errors="surrogateescape")


def _content_bytes(content: Mapping[str, Any], headers: Headers, creator: str) -> bytes | None:
    """The body ``content`` holds (None when it holds none: no ``text``)."""
    text = content.get("text")
    if text is None:
        return None
    if content.get("encoding") == "base64":
        return base64.b64decode(str(text), validate=False)
    return _encode(str(text), headers, str(content.get("mimeType") or ""), creator)


def _timeline(entry: dict[str, Any]) -> tuple[int, int]:
    """(head at, body at) in ns after the request went out: ``time - receive`` and ``time``."""
    timings = entry.get("timings") or {}
    parts = [float(v) for k, v in timings.items() if not str(k).startswith("_") and k != "comment"
             and isinstance(v, (int, float)) and v >= 0]
    total = float(entry["time"]) if isinstance(entry.get("time"), (int, float)) else sum(parts)
    total = max(total, 0.0)
    receive = timings.get("receive")
    receive = float(receive) if isinstance(receive, (int, float)) and receive >= 0 else 0.0
    return ns(max(total - receive, 0.0)), ns(total)


def _entry(
    entry: dict[str, Any],
    n: int,
    creator: str,
    notes: Notes,
    redaction: Redaction,
    labels: dict[str, str],
) -> Interaction:
    rq = entry["request"]
    post = rq.get("postData") or {}
    req_headers = _har_headers(rq.get("headers"))
    req_body = b""
    if post.get("text") is not None:
        req_body = _encode(str(post["text"]), req_headers, str(post.get("mimeType") or ""), creator)
    request = Request(
        method=str(rq["method"]),
        url=str(rq["url"]),
        http_version=http_version(rq.get("httpVersion")),
        headers=req_headers,
        body=req_body,
        started_at=_started(entry),
    )
    rs = entry["response"]
    head_at, body_at = _timeline(entry)
    status = int(rs["status"])
    if status == 0:
        return imported(
            request, None, Source.HAR, labels, redaction,
            outcome=Outcome.UPSTREAM_ERROR, error="no response (the HAR entry has status 0)", end_ns=body_at,
        )
    headers = _har_headers(rs.get("headers"))
    content = rs.get("content") or {}
    body = _content_bytes(content, headers, creator)
    if body is None:
        size = content.get("size")
        if isinstance(size, (int, float)) and size > 0:
            notes.add(f"entry {n}: the HAR does not hold the response body ({int(size)} bytes): imported as head only")
        body = b""
    body, headers, dropped = settle_coding(body, headers)
    if dropped:
        notes.add(f"{dropped} bodies are stored decoded in a HAR: imported without their Content-Encoding header")
    response = one_piece_response(
        status=status,
        reason=str(rs.get("statusText") or "") or None,
        version=http_version(rs.get("httpVersion")),
        headers=headers,
        body=body,
        headers_at_ns=head_at,
        body_at_ns=body_at,
    )
    return imported(request, response, Source.HAR, labels, redaction, end_ns=body_at)


def _exact(entry: dict[str, Any], ext: Any, redaction: Redaction) -> Interaction:
    """An entry streamtape exported: every piece, offset and label as recorded."""
    if not isinstance(ext, dict):
        raise Malformed(f"{EXTENSION} is not an object")
    version = ext.get("version")
    if not isinstance(version, int) or version > EXTENSION_VERSION:
        raise Malformed(
            f"{EXTENSION} extension version {version!r} is not one this streamtape reads ({EXTENSION_VERSION})"
        )
    rq = entry["request"]
    req_headers = _har_headers(rq.get("headers"))
    if "request_body" in ext:
        req_body = base64.b64decode(ext["request_body"])
    else:
        req_body = str((rq.get("postData") or {}).get("text") or "").encode("utf-8")
    request = Request(
        method=str(rq["method"]),
        url=str(rq["url"]),
        http_version=str(rq["httpVersion"]),
        headers=req_headers,
        body=req_body,
        started_at=float(ext["started_at"]),
    )
    try:
        outcome = Outcome(str(ext["outcome"]))
    except ValueError:
        raise Malformed(f"{EXTENSION}: unknown outcome {ext['outcome']!r}") from None
    labels = {str(k): str(v) for k, v in (ext.get("labels") or {}).items()}
    end_ns = ext.get("end_ns")
    response: Response | None = None
    if ext.get("framing") is not None:
        rs = entry["response"]
        headers = _har_headers(rs.get("headers"))
        if "body" in ext:
            body = base64.b64decode(ext["body"])
        else:
            # The exporter writes UTF-8 text, or base64 for anything else.
            body = _content_bytes(rs.get("content") or {}, (), "streamtape") or b""
        pieces = ext["pieces"]
        if sum(int(size) for _, size in pieces) != len(body):
            raise Malformed(
                f"{EXTENSION} pieces add up to {sum(int(s) for _, s in pieces)} bytes but the body "
                f"has {len(body)} (was the entry edited?)"
            )
        out: list[Piece] = []
        pos = 0
        for at, size in pieces:
            out.append(Piece(int(at), body[pos : pos + int(size)]))
            pos += int(size)
        response = Response(
            status=int(rs["status"]),
            reason=str(rs["statusText"]),
            http_version=str(rs["httpVersion"]),
            headers=headers,
            framing=str(ext["framing"]),
            pieces=tuple(out),
            headers_at_ns=int(ext["headers_at_ns"]),
        )
    ix = Interaction(
        request,
        response,
        outcome=outcome,
        error=None if ext.get("error") is None else str(ext["error"]),
        end_ns=None if end_ns is None else int(end_ns),
        labels=labels,
        setup=decode_setup(ext["setup"]) if ext.get("setup") else None,
        websocket=_session_in(ext["websocket"]) if ext.get("websocket") else None,
    )
    return redacted(ix, redaction)


def _session_in(d: Any) -> WebSocketSession:
    """The WebSocket session of an exported entry's extension."""
    if not isinstance(d, dict) or not isinstance(d.get("messages"), list):
        raise Malformed(f"{EXTENSION}.websocket has no message list")
    messages = tuple(
        Message(int(at), Direction(str(direction)), bool(text), base64.b64decode(data))
        for at, direction, text, data in d["messages"]
    )
    code, reason, by = decode_close(d.get("close") or {})
    return WebSocketSession(messages, code, reason, by)


def _session_out(ws: WebSocketSession, started_at: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A session as the extension keeps it (exact), and as Chromium's ``_webSocketMessages``."""
    exact = {
        "messages": [
            [m.at_ns, str(m.direction), m.text, base64.b64encode(m.data).decode("ascii")]
            for m in ws.messages
        ],
        "close": encode_close(ws),
    }
    chromium = [
        {
            "type": "send" if m.direction == Direction.CLIENT else "receive",
            "time": started_at + m.at_ns / 1e9,
            "opcode": 1 if m.text else 2,
            "data": m.data.decode("utf-8", "replace") if m.text else base64.b64encode(m.data).decode("ascii"),
        }
        for m in ws.messages
    ]
    return exact, chromium


# --------------------------------------------------------------------------
# Writing


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _pairs(items: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in items]


def _head_size(version: str, head: bytes) -> int:
    """The bytes of an HTTP/1.x ``head`` (-1, "unknown", for HTTP/2 and 3: HPACK/QPACK sizes vary)."""
    return len(head) if version.upper().startswith("HTTP/1") else -1


def _content(body: bytes, headers: Headers, notes: Notes, n: int) -> tuple[dict[str, Any], bytes]:
    """HAR ``content`` for a response body, and the bytes its ``text`` stands for."""
    coding = content_coding(headers)
    decoded = body
    if coding is not None:
        got = decode_body(body, coding)
        if got is None:
            notes.add(f"interaction {n}: the body is not valid {coding}: content.text holds it as recorded")
        else:
            decoded = got
    ctype = header_value(headers, "content-type") or ""
    content: dict[str, Any] = {"size": len(decoded), "mimeType": ctype or "x-unknown"}
    if decoded is not body and len(decoded) != len(body):
        content["compression"] = len(decoded) - len(body)
    text = _readable_text(decoded, headers)
    if text is not None:
        content["text"] = text
    else:
        content["text"] = base64.b64encode(decoded).decode("ascii")
        content["encoding"] = "base64"
    return content, decoded


def _readable_text(data: bytes, headers: Headers) -> str | None:
    """``data`` as HAR text, when every reader turns that text back into exactly ``data``.

    Browsers encode it with the declared charset or UTF-8; mitmproxy's reader
    with the charset it infers, which for a ``text/event-stream`` without one
    is latin-1 (so "café" alone would come back as ``caf\xe9``). Anything
    those disagree on goes as base64, which every reader decodes alike.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.isascii():
        return text
    for reader in ("mitmproxy", "browser"):
        if _encode(text, headers, "", reader) != data:
            return None
    return text


def entry(ix: Interaction, n: int, notes: Notes) -> dict[str, Any]:
    """One HAR entry, with the ``_streamtape`` extension that gives the interaction back exactly."""
    rq = ix.request
    parts = urlsplit(rq.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    ext: dict[str, Any] = {"version": EXTENSION_VERSION}
    request: dict[str, Any] = {
        "method": rq.method,
        "url": rq.url,
        "httpVersion": rq.http_version,
        "cookies": [],
        "headers": _pairs(rq.headers),
        "queryString": _pairs(parse_qsl(parts.query, keep_blank_values=True)),
        "headersSize": _head_size(rq.http_version, request_head(rq.method, target, rq.headers, rq.http_version)),
        "bodySize": len(rq.body),
    }
    if rq.body:
        try:
            text = rq.body.decode("utf-8")
        except UnicodeDecodeError:
            text = rq.body.decode("utf-8", errors="replace")
            ext["request_body"] = base64.b64encode(rq.body).decode("ascii")
        # HAR 1.2: "text and params fields are mutually exclusive".
        request["postData"] = {"mimeType": rq.header("content-type") or "", "text": text}
    r = ix.response
    end_ns = ix.end_ns if ix.end_ns is not None else (ix.duration_ns or 0)
    if r is None:
        response: dict[str, Any] = {
            "status": 0, "statusText": "", "httpVersion": "", "cookies": [], "headers": [],
            "content": {"size": 0, "mimeType": "x-unknown"}, "redirectURL": "",
            "headersSize": -1, "bodySize": -1,
        }
        head_at = end_ns
        ext["framing"] = None
    else:
        body = r.body
        content, shown = _content(body, r.headers, notes, n)
        if shown != body:
            ext["body"] = base64.b64encode(body).decode("ascii")
        response = {
            "status": r.status,
            "statusText": r.reason,
            "httpVersion": r.http_version,
            "cookies": [],
            "headers": _pairs(r.headers),
            "content": content,
            "redirectURL": r.header("location") or "",
            "headersSize": _head_size(r.http_version, status_head(r.status, r.reason, r.headers, r.http_version)),
            "bodySize": len(body),
        }
        head_at = r.headers_at_ns
        ext["framing"] = str(r.framing)
        ext["headers_at_ns"] = r.headers_at_ns
        ext["pieces"] = [[p.at_ns, len(p.data)] for p in r.pieces]
    end_ns = max(end_ns, head_at)
    ext.update(
        end_ns=ix.end_ns,
        outcome=str(ix.outcome),
        error=ix.error,
        started_at=rq.started_at,
        labels=dict(ix.labels),
    )
    if ix.setup is not None:
        ext["setup"] = encode_setup(ix.setup)
    wait_ms = head_at / 1e6
    receive_ms = (end_ns - head_at) / 1e6
    # HAR's connect is the whole new-connection setup (an upstream proxy's
    # CONNECT included), ssl the TLS part of it; both None on a reused connection.
    marks = ix.setup.marks if ix.setup is not None else {}
    connect_ns = sum(marks.values()) if marks else None
    tls_ns = marks.get("tls")
    out: dict[str, Any] = {
        "startedDateTime": _iso(rq.started_at),
        "time": wait_ms + receive_ms + (connect_ns or 0) / 1e6,
        "request": request,
        "response": response,
        "cache": {},
        "timings": {
            # HAR 1.2: connect includes ssl; -1 when no new connection was made.
            "blocked": -1, "dns": -1,
            "connect": -1 if connect_ns is None else connect_ns / 1e6,
            "ssl": -1 if tls_ns is None else tls_ns / 1e6,
            "send": 0, "wait": wait_ms, "receive": receive_ms,
        },
    }
    if ix.outcome is not Outcome.COMPLETE:
        out["comment"] = f"streamtape: {ix.outcome}" + (f" ({ix.error})" if ix.error else "")
    if ix.websocket is not None:
        ext["websocket"], out["_webSocketMessages"] = _session_out(ix.websocket, rq.started_at)
        out["_resourceType"] = "websocket"
    out[EXTENSION] = ext
    return out


def document(interactions: Iterable[Interaction]) -> tuple[dict[str, Any], list[str]]:
    """A HAR 1.2 document of the interactions, and notes on anything it holds differently."""
    notes = Notes()
    entries = [entry(ix, n, notes) for n, ix in enumerate(interactions)]
    return {
        "log": {
            "version": HAR_VERSION,
            "creator": {"name": "streamtape", "version": __version__},
            "pages": [],
            "entries": entries,
        }
    }, notes.lines


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
