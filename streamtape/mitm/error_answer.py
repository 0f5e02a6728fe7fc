"""The recording proxy's answer when the upstream gives none: JSON an SDK reads, not an HTML page.

When the upstream cannot be reached (connection refused, a host name that
does not resolve, a certificate that fails verification) or closes the
connection before its response head, mitmproxy answers the client itself: a
502 with an HTML page (``format_error`` in ``proxy/layers/http/_base.py``,
sent by ``make_error_response`` in ``_http1.py`` and inline in ``_http2.py``
and ``_http3.py``, with ``content-type: text/html``). An SDK cannot read it:
``openai`` raises ``InternalServerError`` with the page's markup as its
message, Ollama's client shows the raw HTML. The recording addon
(:mod:`streamtape.mitm.record`) wants the client to get what ``streamtape
serve`` sends for its own errors instead: a JSON body in the error shape of
the request's API (:func:`streamtape.wire.error_body`) whose message names
the proxy, the upstream and the cause
(:func:`streamtape.capture.upstream_error.upstream_error_message`), so the
SDK raises its own error type with a readable message.

Why a patch: mitmproxy has no supported way to answer such a request
(checked in the sources of 11.0.2 and 12.3.1, whose code paths here are the
same). ``HttpStream.handle_protocol_error`` sets ``flow.error``, yields the
``error`` hook, and then sends a ``ResponseProtocolError`` to the client's
connection layer, which renders the page; nothing it does after the hook
reads ``flow.response``, so a response set in the ``error`` hook is ignored,
and killing the flow there only drops the client's connection with no
answer at all. The ``request`` and ``server_connect`` hooks come before the
failure: answering there would take a connection of our own to the upstream
first, for every request, beside mitmproxy's (and with none of its TLS and
upstream-proxy settings). ``responseheaders`` never comes.

What is patched, and how narrowly: :func:`install` wraps
``HttpStream.handle_protocol_error`` (the one place that has both the flow
and the event, for HTTP/1, HTTP/2 and HTTP/3 clients alike). The wrapper
passes every command of the original through unchanged, except one: the
``SendHttp(ResponseProtocolError)`` to the client of a flow the recording
addon gave an answer for in its ``error`` hook (:func:`answer`), which
becomes a whole response (head, body, end) sent through mitmproxy's own
response path, so each protocol frames it as it frames a proxied response.
The status stays mitmproxy's (502: mitmproxy 11 and 12 have no 504 for an
upstream that times out); an HTTP/1 connection is closed after it, as after
mitmproxy's page. Every other flow, and every other error of an answered
flow, is left to mitmproxy.

Fail safe: :func:`install` changes nothing unless the names it needs are
there and the method is still a generator function; building the answer
catches everything and falls back to mitmproxy's page. The addon installs
the patch in ``load`` and removes it in ``done``; installs are counted, so
two recorders in one process (the pytest plugin's, a test's) share it and
the last one out restores mitmproxy's method.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import weakref
from collections.abc import Callable, Generator
from typing import Any

from mitmproxy import http

from ..wire import ErrorType, error_body

__all__ = ["answer", "install", "installed", "uninstall"]

log = logging.getLogger("streamtape")

_NO_RESPONSE = 444
"""mitmproxy 11's status code for "send the client nothing" (12.x has ``ErrorCode.http_status_code() is None``)."""

_lock = threading.Lock()
_users = 0
_original: Callable[..., Any] | None = None
_answers: weakref.WeakKeyDictionary[http.HTTPFlow, str] = weakref.WeakKeyDictionary()
"""Flows whose next protocol error towards the client gets the JSON answer, with its message."""

_MARK = "_streamtape_error_answer"


def upstream_of(flow: http.HTTPFlow) -> str:
    """The upstream a flow's request went to, as ``scheme://host:port``."""
    r = flow.request
    host = f"[{r.host}]" if ":" in r.host else r.host
    return f"{r.scheme}://{host}:{r.port}"


def answer(flow: http.HTTPFlow, message: str) -> None:
    """Answer ``flow``'s client with ``message`` in a JSON error body, in place of
    mitmproxy's page (from the ``error`` hook of a flow that has no response)."""
    with _lock:
        _answers[flow] = message


def installed() -> bool:
    """Whether mitmproxy's method is wrapped now."""
    from mitmproxy.proxy.layers.http import HttpStream

    return getattr(HttpStream.handle_protocol_error, _MARK, False)


def install() -> bool:
    """Wrap ``HttpStream.handle_protocol_error`` (once per process; counted). Returns
    whether the answers will be sent: False if mitmproxy's internals are not as checked."""
    global _users, _original
    with _lock:
        if _users == 0:
            try:
                from mitmproxy.proxy.layers.http import HttpStream
            except ImportError:  # pragma: no cover - mitmproxy moved its HTTP layer
                return False
            current = getattr(HttpStream, "handle_protocol_error", None)
            if current is None or not inspect.isgeneratorfunction(current) or not _names():
                log.debug("streamtape: mitmproxy's HttpStream is not as checked; upstream errors keep its page")
                return False
            _original = current
            setattr(HttpStream, "handle_protocol_error", _wrapped(current))  # noqa: B010 - a method, typed
        _users += 1
        return True


def uninstall() -> None:
    """Undo one :func:`install`; the last one restores mitmproxy's method (unless
    something wrapped it again since, which then keeps our wrapper inside it: it only
    acts on flows given an answer)."""
    global _users, _original
    with _lock:
        if _users == 0:
            return
        _users -= 1
        if _users == 0 and _original is not None:
            from mitmproxy.proxy.layers.http import HttpStream

            if getattr(HttpStream.handle_protocol_error, _MARK, False):
                setattr(HttpStream, "handle_protocol_error", _original)  # noqa: B010
            _original = None
            _answers.clear()


def _names() -> bool:
    """The events and the command the wrapper builds are where they were checked."""
    try:
        from mitmproxy.proxy.layers.http import SendHttp  # noqa: F401
        from mitmproxy.proxy.layers.http._events import (  # noqa: F401
            ResponseData,
            ResponseEndOfMessage,
            ResponseHeaders,
            ResponseProtocolError,
        )
    except ImportError:
        return False
    return True


def _wrapped(original: Callable[..., Generator[Any, Any, Any]]) -> Callable[..., Generator[Any, Any, Any]]:
    @functools.wraps(original)
    def handle_protocol_error(self: Any, event: Any) -> Generator[Any, Any, Any]:
        commands = original(self, event)
        reply: Any = None
        while True:
            try:
                command = commands.send(reply)
            except StopIteration as stop:
                return stop.value
            try:
                replacement = _replacement(self, event, command)
            except Exception:  # broad: mitmproxy's internals changed under us; its own page goes out
                log.debug("streamtape: cannot answer an upstream error in JSON", exc_info=True)
                replacement = None
            if replacement is None:
                reply = yield command
            else:
                yield from replacement  # non-blocking commands: their reply is None
                reply = None

    setattr(handle_protocol_error, _MARK, True)
    return handle_protocol_error


def _status(code: object) -> int | None:
    """The status mitmproxy would send for a protocol error's code (None: no answer at all)."""
    to_status = getattr(code, "http_status_code", None)
    if callable(to_status):  # 12.x: an ErrorCode
        status = to_status()
        return status if isinstance(status, int) else None
    if isinstance(code, int) and code != _NO_RESPONSE:  # 11.x: the status itself
        return code
    return None


def _replacement(stream: Any, event: Any, command: Any) -> list[Any] | None:
    """The commands that answer the client in JSON in place of ``command``, or None to send it."""
    from mitmproxy.proxy.layers.http import SendHttp
    from mitmproxy.proxy.layers.http._events import (  # where both versions define them (checked by _names)
        ResponseData,
        ResponseEndOfMessage,
        ResponseHeaders,
        ResponseProtocolError,
    )

    if not (isinstance(command, SendHttp) and command.event is event and isinstance(event, ResponseProtocolError)):
        return None
    flow = getattr(stream, "flow", None)
    if not isinstance(flow, http.HTTPFlow):
        return None
    with _lock:
        message = _answers.pop(flow, None)
    status = _status(event.code)
    # No head has gone out (the flow has no response), and mitmproxy would send a 5xx page.
    if message is None or flow.response is not None or status is None or not 500 <= status < 600:
        return None
    body = error_body(message, ErrorType.UPSTREAM_ERROR, path=flow.request.path)
    response = http.Response.make(status, body, {"Content-Type": "application/json", "Connection": "close"})
    sid, client = event.stream_id, command.connection
    out = [SendHttp(ResponseHeaders(sid, response, False), client)]
    if flow.request.method.upper() != "HEAD":
        out.append(SendHttp(ResponseData(sid, body), client))
    out.append(SendHttp(ResponseEndOfMessage(sid), client))
    return out
