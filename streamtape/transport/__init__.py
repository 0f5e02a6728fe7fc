"""In-process replay: httpx / httpx2 transports and a ``requests`` adapter.

Plug a cassette straight into client code, no sockets::

    import httpx2, openai, streamtape
    t = streamtape.ReplayTransport("chat.tape", profile="chunk=utf8-split;latency=instant")
    client = openai.OpenAI(api_key="x", base_url="http://llm.test/v1",
                           http_client=httpx2.Client(transport=t))

    anthropic.Anthropic(api_key="x", base_url="http://llm.test",
                        http_client=httpx2.Client(transport=t))
    openai.AsyncOpenAI(..., http_client=httpx2.AsyncClient(
        transport=streamtape.AsyncReplayTransport(cas)))

    ollama.Client(host="http://llm.test", transport=streamtape.ReplayTransport(cas))

    session = requests.Session()
    session.mount("http://", streamtape.ReplayAdapter(cas))
    # huggingface_hub (0.x, requests): every session it makes gets the adapter
    huggingface_hub.configure_http_backend(backend_factory=lambda: session)

Clients with no way to pass a transport or session (text-generation's
``Client`` calls ``requests.post``; aiohttp-based clients) are pointed at the
replay server (:mod:`streamtape.serve`) instead.

Every request is matched against the cassette (:class:`streamtape.match.Matcher`,
the same rules as the replay server), its interaction is turned into a
schedule by the profile (:meth:`streamtape.profiles.Profile.schedule`), and a
thin driver plays the schedule:

- each ``send`` step is one piece handed to the client when it is due; the
  response streams lazily, piece by piece, never buffered whole;
- ``realtime=True`` waits for each step's deadline (absolute, from the moment
  the request arrived, so no error accumulates); ``realtime=False`` runs on a
  virtual clock: no sleeping, but the client's read timeout still applies to
  the virtual silences, so a stall longer than the timeout is still a timeout;
- faults surface as the exceptions a real connection gives, of the client's
  own package (httpx or httpx2, detected from the request's class): a cut is
  ``RemoteProtocolError`` (on chunked and Content-Length framing; on a
  close-delimited body a cut looks like the end, exactly as on a socket), a
  reset is ``ReadError``, a silence longer than the read timeout (response
  head or body) is ``ReadTimeout``. The ``requests`` adapter feeds real HTTP/1.1
  wire bytes through ``http.client`` and ``urllib3`` as a socket would, so
  ``requests`` raises what it raises on a real connection
  (``ChunkedEncodingError``, ``ConnectionError``, ``ReadTimeout``).

A request with the header ``X-Streamtape-Profile`` is played under that
profile instead. As from the replay server, a request that matches nothing
gets a 404 with an OpenAI-shaped error body naming the closest recorded
request, and a profile that cannot apply gets a 400; ``no_match="raise"``
raises :class:`~streamtape.errors.NoMatchError` / ``ProfileError`` instead
(an SDK usually wraps a transport exception as a connection error, which is
why the response is the default).

httpx, httpx2 and requests are imported only when used.
"""

from __future__ import annotations

import errno
import http.client
import importlib
import io
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from .cassette import Cassette, Interaction, load, load_many
from .clock import sleep_until as _sleep_until
from .clock import sleep_until_sync as _sleep_until_sync
from .errors import NoMatchError, OptionError, ProfileError, StreamtapeError

if TYPE_CHECKING:
    from .match import Matcher
    from .profiles import Profile

__all__ = [
    "PROFILE_HEADER",
    "AsyncReplayTransport",
    "Plan",
    "ReplayTransport",
    "Replayer",
    "play_actions",
]

PROFILE_HEADER = "x-streamtape-profile"

# --------------------------------------------------------------------------
# The pure part: what to play, and when.


class Action(NamedTuple):
    """One thing the driver does, ``at_ns`` after the request arrived.

    kind: ``data`` (hand ``data`` to the client as one piece), ``end`` (the
    body is complete), ``cut`` (connection closed before the end), ``reset``
    (TCP reset), ``timeout`` (the client's read timeout expires first).
    """

    at_ns: int
    kind: str
    data: bytes = b""


def play_actions(
    steps: Sequence[Any], head_at_ns: int, read_timeout_ns: int | None
) -> Iterator[Action]:
    """The body actions of a schedule, given the client's read timeout. Pure.

    A read timeout fires when the silence since the head or the last piece is
    longer than the timeout: the client gives up before the next step.
    """
    last = head_at_ns
    for step in steps:
        kind = step.kind
        if kind == "send" and not step.data:
            continue
        if read_timeout_ns is not None and step.at_ns - last > read_timeout_ns:
            yield Action(last + read_timeout_ns, "timeout")
            return
        if kind == "send":
            yield Action(step.at_ns, "data", step.data)
            last = max(last, step.at_ns)
            continue
        if kind not in ("end", "cut", "reset"):
            raise StreamtapeError(f"replay schedule has an unknown step kind {kind!r}")
        yield Action(step.at_ns, kind)
        return
    # A schedule always ends with end/cut/reset; be safe if one does not.
    yield Action(last, "end")


@dataclass(frozen=True)
class Plan:
    """A response to play: the matched interaction and its schedule."""

    interaction: Interaction | None
    profile: str
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    framing: str
    head_at_ns: int
    steps: tuple[Any, ...]

    def header(self, name: str) -> str | None:
        lname = name.lower()
        return next((v for k, v in self.headers if k.lower() == lname), None)

    def wire_headers(self) -> list[tuple[str, str]]:
        """The headers to send: the schedule's (hop-by-hop ones already recomputed
        for its framing), plus ``Connection: close`` on a close-delimited body."""
        out = list(self.headers)
        if self.framing == "close-delimited" and self.header("connection") is None:
            out.append(("Connection", "close"))
        return out


def _error_plan(status: int, reason: str, message: str, type_: str) -> Plan:
    """A JSON error response in OpenAI's shape, as the replay server sends."""
    from .profiles import Step

    body = json.dumps({"error": {"message": message, "type": type_}}).encode()
    return Plan(
        interaction=None,
        profile="",
        status=status,
        reason=reason,
        headers=(("Content-Type", "application/json"), ("Content-Length", str(len(body)))),
        framing="content-length",
        head_at_ns=0,
        steps=(Step(0, "send", body), Step(0, "end")),
    )


def _as_interactions(cassette: Any) -> list[Interaction]:
    if isinstance(cassette, Cassette):
        return list(cassette)
    if isinstance(cassette, (str, os.PathLike)):
        if os.path.isdir(cassette):
            return [ix for c in load_many([cassette]) for ix in c]
        return list(load(cassette))
    if isinstance(cassette, Interaction):
        return [cassette]
    try:
        items = list(cassette)
    except TypeError:
        raise OptionError(
            f"cassette must be a Cassette, a path or interactions, not {type(cassette).__name__}"
        ) from None
    out: list[Interaction] = []
    for item in items:
        if isinstance(item, Interaction):
            out.append(item)
        elif isinstance(item, Cassette | str | os.PathLike):
            out.extend(_as_interactions(item))
        else:
            raise OptionError(f"not an interaction or cassette: {type(item).__name__}")
    return out


class Replayer:
    """Matching and profiles for the in-process drivers. Thread-safe.

    ``cassette``: a loaded :class:`Cassette`, a path (file or folder of
    ``*.tape``), or interactions. ``profile``: preset name, profile text or a
    parsed :class:`~streamtape.profiles.Profile`.
    """

    def __init__(
        self,
        cassette: Any,
        profile: str | Profile = "faithful",
        *,
        ignore_fields: Sequence[str] = (),
        match_headers: Sequence[str] = (),
        strict: bool = False,
        seed: int | None = None,
        no_match: str = "404",
    ) -> None:
        from .match import Matcher
        from .profiles import parse_profile

        if no_match not in ("404", "raise"):
            raise OptionError(f"no_match must be '404' or 'raise', not {no_match!r}")
        self.interactions = _as_interactions(cassette)
        if isinstance(profile, str):
            self.profile: Profile = parse_profile(profile)
        else:  # an already parsed Profile
            self.profile, profile = profile, profile.text
        self.profile_text = profile
        self.seed = seed
        self.no_match = no_match
        self.matcher: Matcher = Matcher(
            self.interactions,
            ignore_fields=tuple(ignore_fields),
            match_headers=tuple(match_headers),
            strict=strict,
        )
        self._profiles: dict[str, Profile] = {profile: self.profile}
        self._lock = threading.Lock()

    @property
    def received(self) -> list[dict[str, Any]]:
        """The requests seen so far (as the replay server's ``/_streamtape/requests``)."""
        return self.matcher.received

    def _profile_for(self, headers: Sequence[tuple[str, str]]) -> tuple[str, Profile]:
        override = next((v for k, v in headers if k.lower() == PROFILE_HEADER), None)
        if override is None:
            return self.profile_text, self.profile
        with self._lock:
            prof = self._profiles.get(override)
        if prof is None:
            from .profiles import parse_profile

            prof = parse_profile(override)
            with self._lock:
                self._profiles[override] = prof
        return override, prof

    def plan(
        self, method: str, url: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> Plan:
        """Match a request and schedule its response.

        As the replay server: no match is a 404 (``streamtape_no_match``), a bad
        ``X-Streamtape-Profile`` or a profile that cannot apply to the matched
        recording is a 400 (``streamtape_bad_profile``); with ``no_match="raise"``
        they raise :class:`NoMatchError` / :class:`ProfileError` instead.
        """
        try:
            text, prof = self._profile_for(headers)
            ix = self.matcher.match(method, url, list(headers), body)
            sched = prof.schedule(ix, seed=self.seed)
        except NoMatchError as e:
            if self.no_match == "raise":
                raise
            return _error_plan(404, "Not Found", str(e), "streamtape_no_match")
        except ProfileError as e:
            if self.no_match == "raise":
                raise
            return _error_plan(400, "Bad Request", str(e), "streamtape_bad_profile")
        return Plan(
            interaction=ix,
            profile=text,
            status=sched.status,
            reason=sched.reason,
            headers=tuple(sched.headers),
            framing=sched.framing,
            head_at_ns=sched.head_at_ns,
            steps=tuple(sched.steps),
        )


def _timeout_ns(seconds: float | None) -> int | None:
    if seconds is None:
        return None
    return max(0, int(seconds * 1e9))


# --------------------------------------------------------------------------
# httpx / httpx2


@cache
def _package(name: str) -> Any:
    pkg = importlib.import_module(name)
    for attr in ("Response", "RemoteProtocolError", "ReadError", "ReadTimeout", "SyncByteStream"):
        if not hasattr(pkg, attr):
            raise OptionError(f"{name} is not an httpx-like package (no {attr})")
    return pkg


def _package_of(request: Any, explicit: str | None) -> Any:
    if explicit is not None:
        return _package(explicit)
    return _package(type(request).__module__.split(".")[0])


def _cut_message(plan: Plan, sent: int) -> str:
    """httpcore's message for a body cut short (the same text on httpx and httpx2)."""
    if plan.framing == "content-length":
        return (
            "peer closed connection without sending complete message body "
            f"(received {sent} bytes, expected {plan.header('content-length')})"
        )
    return "peer closed connection without sending complete message body (incomplete chunked read)"


_RESET_MESSAGE = "[Errno 104] Connection reset by peer"


def _fault(pkg: Any, plan: Plan, kind: str, sent: int, request: Any) -> Exception | None:
    """The exception a real connection raises for an ending, or None for a clean end."""
    if kind == "cut":
        if plan.framing == "close-delimited":
            return None  # on a socket, a close IS the end of a close-delimited body
        return pkg.RemoteProtocolError(_cut_message(plan, sent), request=request)
    if kind == "reset":
        return pkg.ReadError(_RESET_MESSAGE, request=request)
    if kind == "timeout":
        return pkg.ReadTimeout("timed out", request=request)
    return None


def _request_parts(request: Any) -> tuple[str, str, list[tuple[str, str]]]:
    headers = [(k, v) for k, v in request.headers.multi_items()]
    return request.method, str(request.url), headers


class _SyncBody:
    """Plays a plan's body actions to a sync httpx/httpx2 client, piece by piece."""

    def __init__(self, pkg: Any, plan: Plan, request: Any, t0: int, realtime: bool, read_ns: int | None):
        self._pkg, self._plan, self._request = pkg, plan, request
        self._t0, self._realtime, self._read_ns = t0, realtime, read_ns
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        t0, realtime, now = self._t0, self._realtime, time.perf_counter_ns
        for at_ns, kind, data in play_actions(self._plan.steps, self._plan.head_at_ns, self._read_ns):
            if self._closed:
                return
            if realtime and t0 + at_ns > now():
                _sleep_until_sync(t0 + at_ns)
            if kind == "data":
                sent += len(data)
                yield data
                continue
            exc = _fault(self._pkg, self._plan, kind, sent, self._request)
            if exc is not None:
                raise exc
            return

    def close(self) -> None:
        self._closed = True


class _AsyncBody:
    """Plays a plan's body actions to an async httpx/httpx2 client, piece by piece."""

    def __init__(self, pkg: Any, plan: Plan, request: Any, t0: int, realtime: bool, read_ns: int | None):
        self._pkg, self._plan, self._request = pkg, plan, request
        self._t0, self._realtime, self._read_ns = t0, realtime, read_ns
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import asyncio

        sent = 0
        t0, realtime = self._t0, self._realtime
        for at_ns, kind, data in play_actions(self._plan.steps, self._plan.head_at_ns, self._read_ns):
            if self._closed:
                return
            if realtime:
                await _sleep_until(t0 + at_ns)
            else:
                await asyncio.sleep(0)  # let other tasks run, as a socket read would
            if kind == "data":
                sent += len(data)
                yield data
                continue
            exc = _fault(self._pkg, self._plan, kind, sent, self._request)
            if exc is not None:
                raise exc
            return

    async def aclose(self) -> None:
        self._closed = True


@cache
def _stream_classes(pkg_name: str) -> tuple[type, type]:
    pkg = _package(pkg_name)
    sync_cls = type("ReplayByteStream", (_SyncBody, pkg.SyncByteStream), {})
    async_cls = type("AsyncReplayByteStream", (_AsyncBody, pkg.AsyncByteStream), {})
    return sync_cls, async_cls


def _head_error(pkg: Any, plan: Plan, request: Any, read_ns: int | None) -> tuple[int, Exception | None]:
    """When the head is due, or (when, exception) if the client fails first."""
    if plan.status == 0:  # no response head was recorded: the server hangs up first
        end = plan.steps[-1] if plan.steps else None
        at = end.at_ns if end is not None else 0
        if read_ns is not None and at > read_ns:
            return read_ns, pkg.ReadTimeout("timed out", request=request)
        if end is not None and end.kind == "reset":
            return at, pkg.ReadError(_RESET_MESSAGE, request=request)
        return at, pkg.RemoteProtocolError(
            "Server disconnected without sending a response.", request=request
        )
    if read_ns is not None and plan.head_at_ns > read_ns:
        return read_ns, pkg.ReadTimeout("timed out", request=request)
    return plan.head_at_ns, None


def _build_response(pkg: Any, plan: Plan, request: Any, stream: Any) -> Any:
    return pkg.Response(
        plan.status,
        headers=plan.wire_headers(),
        stream=stream,
        request=request,
        extensions={"http_version": b"HTTP/1.1", "reason_phrase": plan.reason.encode("latin-1", "replace")},
    )


class _TransportBase:
    def __init__(
        self,
        cassette: Any,
        profile: str = "faithful",
        *,
        realtime: bool = True,
        ignore_fields: Sequence[str] = (),
        match_headers: Sequence[str] = (),
        strict: bool = False,
        seed: int | None = None,
        no_match: str = "404",
        package: str | None = None,
    ) -> None:
        self.replayer = Replayer(
            cassette,
            profile,
            ignore_fields=ignore_fields,
            match_headers=match_headers,
            strict=strict,
            seed=seed,
            no_match=no_match,
        )
        self.realtime = realtime
        self.package = package

    @property
    def received(self) -> list[dict[str, Any]]:
        """The requests seen so far."""
        return self.replayer.received

    @property
    def interactions(self) -> list[Interaction]:
        return self.replayer.interactions


class ReplayTransport(_TransportBase):
    """A sync httpx / httpx2 transport that answers from a cassette.

    ``ReplayTransport(cassette, profile="faithful", *, realtime=True,
    ignore_fields=(), match_headers=(), strict=False, seed=None,
    no_match="404", package=None)``. ``package`` forces ``"httpx"`` or
    ``"httpx2"``; by default it follows the class of each request, so one
    transport serves both kinds of client.
    """

    def handle_request(self, request: Any) -> Any:
        t0 = time.perf_counter_ns()
        pkg = _package_of(request, self.package)
        method, url, headers = _request_parts(request)
        body = request.read()
        plan = self.replayer.plan(method, url, headers, body)
        read_ns = _timeout_ns((request.extensions.get("timeout") or {}).get("read"))
        due, exc = _head_error(pkg, plan, request, read_ns)
        if self.realtime:
            _sleep_until_sync(t0 + due)
        if exc is not None:
            raise exc
        sync_cls, _ = _stream_classes(pkg.__name__)
        return _build_response(pkg, plan, request, sync_cls(pkg, plan, request, t0, self.realtime, read_ns))

    def close(self) -> None:
        pass

    def __enter__(self) -> ReplayTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncReplayTransport(_TransportBase):
    """The async twin of :class:`ReplayTransport` (same arguments), for
    ``httpx.AsyncClient`` / ``httpx2.AsyncClient`` on asyncio."""

    async def handle_async_request(self, request: Any) -> Any:
        t0 = time.perf_counter_ns()
        pkg = _package_of(request, self.package)
        method, url, headers = _request_parts(request)
        body = await request.aread()
        plan = self.replayer.plan(method, url, headers, body)
        read_ns = _timeout_ns((request.extensions.get("timeout") or {}).get("read"))
        due, exc = _head_error(pkg, plan, request, read_ns)
        if self.realtime:
            await _sleep_until(t0 + due)
        if exc is not None:
            raise exc
        _, async_cls = _stream_classes(pkg.__name__)
        return _build_response(pkg, plan, request, async_cls(pkg, plan, request, t0, self.realtime, read_ns))

    async def aclose(self) -> None:
        pass

    async def __aenter__(self) -> AsyncReplayTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# --------------------------------------------------------------------------
# requests: real HTTP/1.1 wire bytes through http.client and urllib3


class _WireSource(io.RawIOBase):
    """A socket's receive side: the plan as HTTP/1.1 bytes, each piece when due.

    Raises ``TimeoutError`` (``socket.timeout``) when the read timeout expires
    and ``ConnectionResetError`` on a reset, as ``recv`` does; a cut is EOF.
    """

    def __init__(self, plan: Plan, t0: int, realtime: bool, read_ns: int | None):
        super().__init__()
        self._plan, self._t0, self._realtime, self._read_ns = plan, t0, realtime, read_ns
        self._chunked = plan.framing == "chunked"
        self._buf = b""
        self._pos = 0
        self._eof = False
        self._error: BaseException | None = None
        self._actions: Iterator[Action] | None = None

    def readable(self) -> bool:
        return True

    def _wait(self, at_ns: int) -> None:
        if self._realtime:
            _sleep_until_sync(self._t0 + at_ns)

    def _head(self) -> bytes:
        plan = self._plan
        lines = [f"HTTP/1.1 {plan.status} {plan.reason or http.client.responses.get(plan.status, '')}"]
        lines += [f"{k}: {v}" for k, v in plan.wire_headers()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")

    def _advance(self) -> None:
        if self._error is not None:
            raise self._error
        if self._actions is None:
            plan = self._plan
            if plan.status == 0:  # no response head was recorded: hang up first
                end = plan.steps[-1] if plan.steps else None
                at = end.at_ns if end is not None else 0
                if self._read_ns is not None and at > self._read_ns:
                    self._wait(self._read_ns)
                    self._error = TimeoutError("timed out")
                    raise self._error
                self._wait(at)
                if end is not None and end.kind == "reset":
                    self._error = ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
                    raise self._error
                self._eof = True
                return
            if self._read_ns is not None and plan.head_at_ns > self._read_ns:
                self._wait(self._read_ns)
                self._error = TimeoutError("timed out")
                raise self._error
            self._wait(plan.head_at_ns)
            self._actions = play_actions(plan.steps, plan.head_at_ns, self._read_ns)
            self._buf, self._pos = self._head(), 0
            return
        act = next(self._actions, None)
        if act is None:
            self._eof = True
            return
        self._wait(act.at_ns)
        if act.kind == "data":
            data = act.data
            self._buf = b"%x\r\n%s\r\n" % (len(data), data) if self._chunked else data
            self._pos = 0
        elif act.kind == "end":
            if self._chunked:
                self._buf, self._pos = b"0\r\n\r\n", 0
            self._actions = iter(())
        elif act.kind == "cut":
            self._eof = True
        elif act.kind == "reset":
            self._error = ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
            raise self._error
        else:  # timeout
            self._error = TimeoutError("timed out")
            raise self._error

    def readinto(self, b: Any) -> int:
        while self._pos >= len(self._buf):
            if self._eof:
                return 0
            self._advance()
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        return n


class _WireSocket:
    """Just enough of a socket for ``http.client.HTTPResponse``."""

    def __init__(self, source: _WireSource):
        self._source = source

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(self._source)

    def close(self) -> None:
        pass


def _read_timeout_of(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, tuple):
        return timeout[1]
    if isinstance(timeout, int | float):
        return float(timeout)
    read = getattr(timeout, "read_timeout", None)  # urllib3.Timeout
    return read if isinstance(read, int | float) else None


def _request_body(body: Any) -> bytes:
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


@cache
def _adapter_class() -> type:
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3 import HTTPResponse
    from urllib3.exceptions import ProtocolError, ReadTimeoutError

    class ReplayAdapter(_TransportBase, HTTPAdapter):
        """A ``requests`` transport adapter that answers from a cassette.

        ``ReplayAdapter(cassette, profile="faithful", *, realtime=True,
        ignore_fields=(), match_headers=(), strict=False, seed=None,
        no_match="404")``, the options of :class:`ReplayTransport`; mount it
        on a Session::

            session.mount("http://", ReplayAdapter(cas))
            session.mount("https://", ReplayAdapter(cas))

        The response is real HTTP/1.1 bytes parsed by ``http.client`` and
        ``urllib3``, each piece delivered when due, so ``iter_content`` and
        ``iter_lines`` see chunk boundaries, cuts, resets and timeouts as on
        a real connection.
        """

        def __init__(self, cassette: Any, profile: str = "faithful", **options: Any) -> None:
            HTTPAdapter.__init__(self)
            _TransportBase.__init__(self, cassette, profile, **options)

        def send(  # type: ignore[override]
            self,
            request: requests.PreparedRequest,
            stream: bool = False,
            timeout: Any = None,
            verify: Any = True,
            cert: Any = None,
            proxies: Any = None,
        ) -> requests.Response:
            t0 = time.perf_counter_ns()
            headers = list(request.headers.items())
            body = _request_body(request.body)
            plan = self.replayer.plan(request.method or "GET", request.url or "", headers, body)
            read_s = _read_timeout_of(timeout)
            source = _WireSource(plan, t0, self.realtime, _timeout_ns(read_s))
            raw = http.client.HTTPResponse(_WireSocket(source), method=request.method)  # type: ignore[arg-type]
            try:
                try:
                    raw.begin()
                except BaseException:
                    raw.close()  # no half-read response left for the GC to close
                    raise
            except TimeoutError as e:
                err = ReadTimeoutError(
                    None, request.url, f"Read timed out. (read timeout={read_s})"  # type: ignore[arg-type]
                )
                raise requests.exceptions.ReadTimeout(err, request=request) from e
            except (http.client.HTTPException, OSError) as e:
                err2 = ProtocolError("Connection aborted.", e)
                raise requests.exceptions.ConnectionError(err2, request=request) from e
            resp = HTTPResponse(
                body=raw,
                headers=list(raw.msg.items()),  # type: ignore[arg-type]
                status=raw.status,
                version=raw.version,
                version_string="HTTP/1.1",
                reason=raw.reason,
                preload_content=False,
                decode_content=False,
                original_response=raw,
                enforce_content_length=True,
                request_method=request.method,
                request_url=request.url,
            )
            response = self.build_response(request, resp)
            if not stream:
                _ = response.content
            return response

    ReplayAdapter.__module__ = __name__
    ReplayAdapter.__qualname__ = "ReplayAdapter"
    return ReplayAdapter


def __getattr__(name: str) -> Any:
    # ReplayAdapter subclasses requests' HTTPAdapter: built on first use so that
    # importing this module does not import requests.
    if name == "ReplayAdapter":
        return _adapter_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
