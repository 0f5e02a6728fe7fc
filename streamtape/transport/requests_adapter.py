"""ReplayAdapter: a ``requests`` transport adapter that answers from a cassette.

``requests`` has no transport interface below ``urllib3``, so the adapter
feeds real HTTP/1.1 wire bytes through ``http.client`` and ``urllib3``, as a
socket would: :class:`_WireSource` is a socket's receive side whose bytes are
the plan's head and body (framed by :mod:`streamtape.wire`), each piece
readable when it is due. ``requests`` then parses, de-chunks and fails exactly
as on a real connection (``ChunkedEncodingError``, ``ConnectionError``,
``ReadTimeout``). The timing and the endings come from the same pure
functions as the httpx faces (:func:`~.replayer.head_failure`,
:func:`~.replayer.play_actions`).

This module imports ``requests``; :mod:`streamtape.transport` imports it only
when ``ReplayAdapter`` is first asked for.
"""

from __future__ import annotations

import errno
import http.client
import io
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, Unpack

import requests
from requests.adapters import HTTPAdapter
from urllib3 import HTTPHeaderDict, HTTPResponse, Timeout
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from ..clock import sleep_until_sync
from ..profiles import Profile, StepKind
from ..wire import body_end, framer, response_head
from .replayer import (
    TIMEOUT,
    Action,
    CassetteSource,
    MatchOptions,
    ReplayDriver,
    ReplayPlan,
    head_failure,
    play_actions,
    timeout_ns,
)

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["ReplayAdapter"]

_SEND, _END = StepKind.SEND, StepKind.END

_Timeout = float | tuple[float | None, float | None] | Timeout | None
"""What ``requests`` passes as ``timeout``: seconds, (connect, read), or urllib3's ``Timeout``."""


class _Readable(Protocol):
    def read(self) -> bytes | str: ...


def _ending(failure: Action) -> None:
    """Raise what ``recv`` raises for an ending; return for a cut (EOF)."""
    if failure.kind == TIMEOUT:
        raise TimeoutError("timed out")
    if failure.kind is StepKind.RESET:
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")


class _WireSource(io.RawIOBase):
    """A socket's receive side: the plan as HTTP/1.1 bytes, each piece when due.

    Raises ``TimeoutError`` (``socket.timeout``) when the read timeout expires
    and ``ConnectionResetError`` on a reset, as ``recv`` does, and again on
    every later read; a cut is EOF.
    """

    def __init__(
        self, plan: ReplayPlan, method: str, t0: int, realtime: bool, read_ns: int | None
    ) -> None:
        super().__init__()
        self._plan, self._method = plan, method
        self._t0, self._realtime, self._read_ns = t0, realtime, read_ns
        self._wire = self._script()
        self._buf = b""
        self._pos = 0
        self._error: OSError | None = None

    def readable(self) -> bool:
        return True

    def _wait(self, at_ns: int) -> None:
        if self._realtime:
            sleep_until_sync(self._t0 + at_ns)

    def _script(self) -> Iterator[bytes]:
        """The wire bytes in order, each yielded when due; raises as ``recv`` does."""
        schedule = self._plan.schedule
        failure = head_failure(schedule, self._read_ns)
        if failure is not None:
            self._wait(failure.at_ns)
            _ending(failure)
            return
        self._wait(schedule.head_at_ns)
        head, framing, _ = response_head(
            schedule.status,
            schedule.reason,
            schedule.end_to_end,
            schedule.framing,
            content_length=schedule.content_length,
            method=self._method,
        )
        yield head
        frame = framer(framing)
        for action in play_actions(schedule.steps, schedule.head_at_ns, self._read_ns):
            self._wait(action.at_ns)
            if action.kind is _SEND:
                yield frame(action.data)
                continue
            if action.kind is _END:
                yield body_end(framing)
                return
            _ending(action)
            return

    def _next(self) -> bytes | None:
        if self._error is not None:
            raise self._error
        try:
            return next(self._wire, None)
        except OSError as e:
            self._error = e
            raise

    def readinto(self, buffer: WriteableBuffer) -> int:
        while self._pos >= len(self._buf):
            piece = self._next()
            if piece is None:
                return 0
            self._buf, self._pos = piece, 0
        view = memoryview(buffer)
        n = min(len(view), len(self._buf) - self._pos)
        view[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        return n


class _WireSocket:
    """Just enough of a socket for ``http.client.HTTPResponse``."""

    def __init__(self, source: _WireSource) -> None:
        self._source = source

    def makefile(self, mode: str = "rb", *args: object, **kwargs: object) -> io.BufferedReader:
        return io.BufferedReader(self._source)

    def close(self) -> None:
        pass


def _read_timeout_of(timeout: _Timeout) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, tuple):
        return timeout[1]
    if isinstance(timeout, Timeout):
        read = timeout.read_timeout
        return read if isinstance(read, int | float) else None
    return float(timeout)


def _request_body(body: bytes | str | _Readable | Iterable[bytes | str] | None) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    if hasattr(body, "read"):
        data = body.read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return b"".join(p.encode("utf-8") if isinstance(p, str) else bytes(p) for p in body)


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


class ReplayAdapter(ReplayDriver, HTTPAdapter):
    """A ``requests`` transport adapter that answers from a cassette.

    ``ReplayAdapter(cassette, profile="faithful", *, realtime=True,
    ignore_fields=(), match_headers=(), strict=False, strict_nulls=False, seed=None,
    no_match=422)``, the options of :class:`ReplayTransport`; mount it
    on a Session::

        session.mount("http://", ReplayAdapter(cas))
        session.mount("https://", ReplayAdapter(cas))

    The response is real HTTP/1.1 bytes parsed by ``http.client`` and
    ``urllib3``, each piece delivered when due, so ``iter_content`` and
    ``iter_lines`` see chunk boundaries, cuts, resets and timeouts as on
    a real connection.
    """

    def __init__(
        self,
        cassette: CassetteSource,
        profile: str | Profile = "faithful",
        *,
        realtime: bool = True,
        **options: Unpack[MatchOptions],
    ) -> None:
        HTTPAdapter.__init__(self)
        ReplayDriver.__init__(self, cassette, profile, realtime=realtime, **options)

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: _Timeout = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        t0 = time.perf_counter_ns()
        method, url = request.method or "GET", request.url or ""
        headers = [(k, _text(v)) for k, v in request.headers.items()]
        plan = self.replayer.plan(method, url, headers, _request_body(request.body))
        read_s = _read_timeout_of(timeout)
        source = _WireSource(plan, method, t0, self.realtime, timeout_ns(read_s))
        raw = http.client.HTTPResponse(_WireSocket(source), method=method)  # type: ignore[arg-type]
        try:
            try:
                raw.begin()
            except BaseException:
                raw.close()  # no half-read response left for the GC to close
                raise
        except TimeoutError as e:
            err = ReadTimeoutError(None, url, f"Read timed out. (read timeout={read_s})")  # type: ignore[arg-type]
            raise requests.exceptions.ReadTimeout(err, request=request) from e
        except (http.client.HTTPException, OSError) as e:
            err2 = ProtocolError("Connection aborted.", e)
            raise requests.exceptions.ConnectionError(err2, request=request) from e
        resp = HTTPResponse(
            body=raw,
            headers=HTTPHeaderDict(raw.msg.items()),
            status=raw.status,
            version=raw.version,
            version_string="HTTP/1.1",
            reason=raw.reason,
            preload_content=False,
            decode_content=False,
            original_response=raw,
            enforce_content_length=True,
            request_method=method,
            request_url=url,
        )
        response = self.build_response(request, resp)
        if not stream:
            _ = response.content
        return response
