"""ReplayTransport: one transport for httpx and httpx2 clients, sync and async.

As httpx's ``MockTransport``, one class serves both kinds of client:
``handle_request`` and ``handle_async_request`` are thin faces over one
opening (match, schedule, when the head is due, whether the client fails
first) and one body player, :class:`_BodyPlayer`, whose pure script of
deadlines and pieces is walked by a sync face (blocking waits) and an async
face (awaited waits). httpx and httpx2 have one API but separate classes, so
the package is picked per request from the request's class (or forced with
``package=``), and the response, its stream and the exceptions are that
package's own. Neither package is imported until a request comes.

Typing: httpx's and httpx2's clients take a transport annotated with their
own ``BaseTransport`` / ``AsyncBaseTransport`` (nominal classes, so no
Protocol matches them). To the type checker, :class:`ReplayTransport`
therefore derives from all four (``_ClientTransport``, defined under
``TYPE_CHECKING``) and overloads ``handle_request`` and
``handle_async_request`` per package; at runtime it derives from none of
them, which is what keeps both packages unimported until a request comes.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Literal, Self, Unpack, overload

from ..clock import sleep_until, sleep_until_sync
from ..errors import OptionError
from ..profiles import Profile, Schedule, StepKind
from ..wire import Framing
from .replayer import (
    TIMEOUT,
    Action,
    ActionKind,
    CassetteSource,
    MatchOptions,
    ReplayDriver,
    ReplayPlan,
    Timeline,
    head_failure,
    play_actions,
    timeout_ns,
)

if TYPE_CHECKING:
    import httpx
    import httpx2

    HttpxRequest = httpx.Request | httpx2.Request
    HttpxResponse = httpx.Response | httpx2.Response

    class _ClientTransport(  # type: ignore[misc]
        httpx.BaseTransport,
        httpx.AsyncBaseTransport,
        httpx2.BaseTransport,
        httpx2.AsyncBaseTransport,
    ):
        """What a type checker sees :class:`ReplayTransport` derive from: the four
        transport bases its clients' ``transport=`` parameters are annotated with.

        (The ignore: httpx's and httpx2's ``handle_request`` differ, each taking
        its own ``Request``; ``ReplayTransport`` reconciles them with an overload
        per package, which mypy checks against every base.)
        """

else:
    _ClientTransport = object  # at runtime no base: httpx and httpx2 stay unimported

__all__ = ["AsyncReplayTransport", "PackageName", "ReplayTransport"]

PackageName = Literal["httpx", "httpx2"]

_SEND = StepKind.SEND
_RESET_MESSAGE = "[Errno 104] Connection reset by peer"
_NEEDED = ("Response", "RemoteProtocolError", "ReadError", "ReadTimeout", "SyncByteStream", "AsyncByteStream")


@dataclass(frozen=True)
class _Package:
    """What a replay uses of httpx or httpx2 (one API, separate classes).

    The exceptions carry httpcore's wording, the same on both packages, so a
    fault reads as it does on a real connection.
    """

    module: ModuleType
    response: Callable[..., HttpxResponse]
    remote_protocol_error: Callable[..., Exception]
    read_error: Callable[..., Exception]
    read_timeout: Callable[..., Exception]
    stream: type[_BodyPlayer]

    def head_error(self, failure: Action, request: HttpxRequest) -> Exception:
        """The exception for a connection that fails before the response head."""
        if failure.kind == TIMEOUT:
            return self.read_timeout("timed out", request=request)
        if failure.kind is StepKind.RESET:
            return self.read_error(_RESET_MESSAGE, request=request)
        return self.remote_protocol_error(
            "Server disconnected without sending a response.", request=request
        )

    def body_error(
        self, kind: ActionKind, schedule: Schedule, sent: int, request: HttpxRequest
    ) -> Exception | None:
        """The exception a real connection raises for a body ending, or None for a clean end."""
        if kind is StepKind.CUT:
            if schedule.framing == Framing.CLOSE_DELIMITED:
                return None  # on a socket, a close IS the end of a close-delimited body
            return self.remote_protocol_error(_cut_message(schedule, sent), request=request)
        if kind is StepKind.RESET:
            return self.read_error(_RESET_MESSAGE, request=request)
        if kind == TIMEOUT:
            return self.read_timeout("timed out", request=request)
        return None


def _cut_message(schedule: Schedule, sent: int) -> str:
    """httpcore's message for a body cut short (the same text on httpx and httpx2)."""
    if schedule.framing == Framing.CONTENT_LENGTH:
        return (
            "peer closed connection without sending complete message body "
            f"(received {sent} bytes, expected {schedule.header('content-length')})"
        )
    return "peer closed connection without sending complete message body (incomplete chunked read)"


_PACKAGES: dict[str, _Package] = {}
"""The package built for each name, for the module object under that name when built."""


def _package(name: str) -> _Package:
    """The classes of the package the name stands for now, in ``sys.modules``.

    Kept per name, but only while the name still holds the module they came
    from: a package imported again (pytester's in-process runs drop the
    modules each run imported, and the next run imports them anew) has new
    classes, and its client asserts that a response's stream is one of its own
    ``SyncByteStream``, and catches only its own exceptions.
    """
    module = sys.modules.get(name) or importlib.import_module(name)
    pkg = _PACKAGES.get(name)
    if pkg is None or pkg.module is not module:
        pkg = _PACKAGES[name] = _build_package(module)
    return pkg


def _build_package(module: ModuleType) -> _Package:
    name = module.__name__
    for attr in _NEEDED:
        if not hasattr(module, attr):
            raise OptionError(f"{name} is not an httpx-like package (no {attr})")
    # One stream class per package, both a sync and an async byte stream of it
    # (as httpx's own ByteStream): the client picks the face it reads through.
    stream = type(
        "ReplayByteStream", (_BodyPlayer, module.SyncByteStream, module.AsyncByteStream), {}
    )
    return _Package(
        module=module,
        response=module.Response,
        remote_protocol_error=module.RemoteProtocolError,
        read_error=module.ReadError,
        read_timeout=module.ReadTimeout,
        stream=stream,
    )


class _BodyPlayer:
    """Plays a plan's body to an httpx or httpx2 client, piece by piece, when due.

    :meth:`_script` is the whole behaviour; ``__iter__`` and ``__aiter__`` only
    wait for its deadlines, blocking or awaiting.
    """

    def __init__(
        self,
        package: _Package,
        plan: ReplayPlan,
        request: HttpxRequest,
        t0: int,
        realtime: bool,
        read_ns: int | None,
    ) -> None:
        self._package, self._plan, self._request = package, plan, request
        self._t0, self._realtime, self._read_ns = t0, realtime, read_ns
        self._closed = False

    def _script(self) -> Iterator[tuple[int, bytes]]:
        """Deadlines (``perf_counter_ns``) and the piece due at each.

        The last pair has no piece: it is the ending's deadline, and resuming
        after it raises the ending's exception (a cut, a reset, a read timeout)
        or stops (a clean end).
        """
        schedule, t0, sent = self._plan.schedule, self._t0, 0
        for at_ns, kind, data in play_actions(schedule.steps, schedule.head_at_ns, self._read_ns):
            if self._closed:
                return
            yield t0 + at_ns, data
            if kind is _SEND:
                sent += len(data)
                continue
            exc = self._package.body_error(kind, schedule, sent, self._request)
            if exc is not None:
                raise exc
            return

    def _timeline(self) -> Timeline | None:
        """The plan's flat timeline when this client's read timeout cannot fire, else None.

        The common case (no read timeout, or one longer than every silence)
        then plays from one shared tuple: no :class:`Action` per piece, no
        clock read while pieces are already due (an instant replay reads the
        clock once).
        """
        timeline = self._plan.timeline
        if timeline is None or not timeline.plays_whole(self._read_ns):
            return None
        return timeline

    def _ending(self, timeline: Timeline) -> None:
        exc = self._package.body_error(
            timeline.ending.kind, self._plan.schedule, timeline.sent, self._request
        )
        if exc is not None:
            raise exc

    def __iter__(self) -> Iterator[bytes]:
        realtime, now = self._realtime, time.perf_counter_ns
        timeline = self._timeline()
        if timeline is None:
            for due, data in self._script():
                if realtime and due > now():
                    sleep_until_sync(due)
                if data:
                    yield data
            return
        t0, seen = self._t0, now()
        for at_ns, data in zip(timeline.at, timeline.datas, strict=True):
            if self._closed:
                return
            if realtime and t0 + at_ns > seen:
                sleep_until_sync(t0 + at_ns)
                seen = now()
            yield data
        if self._closed:
            return
        if realtime:
            sleep_until_sync(t0 + timeline.ending.at_ns)
        self._ending(timeline)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        realtime, now = self._realtime, time.perf_counter_ns
        timeline = self._timeline()
        if timeline is None:
            for due, data in self._script():
                if not realtime:
                    await asyncio.sleep(0)  # let other tasks run, as a socket read would
                elif due > now():
                    await sleep_until(due)
                if data:
                    yield data
            return
        t0, seen = self._t0, now()
        for at_ns, data in zip(timeline.at, timeline.datas, strict=True):
            if self._closed:
                return
            if not realtime:
                await asyncio.sleep(0)
            elif t0 + at_ns > seen:
                await sleep_until(t0 + at_ns)
                seen = now()
            yield data
        if self._closed:
            return
        if not realtime:
            await asyncio.sleep(0)
        else:
            await sleep_until(t0 + timeline.ending.at_ns)
        self._ending(timeline)

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self._closed = True


@dataclass(frozen=True)
class _Opening:
    """A request matched and scheduled: when its head is due, and whether the
    client fails before it (``failure``)."""

    package: _Package
    plan: ReplayPlan
    request: HttpxRequest
    t0: int
    read_ns: int | None
    head_due_ns: int
    failure: Exception | None

    def response(self, realtime: bool) -> HttpxResponse:
        """The response whose body plays the plan; raises the failure instead, if any."""
        if self.failure is not None:
            raise self.failure
        schedule, pkg = self.plan.schedule, self.package
        headers = list(schedule.headers)
        if schedule.framing == Framing.CLOSE_DELIMITED:
            headers.append(("Connection", "close"))
        stream = pkg.stream(pkg, self.plan, self.request, self.t0, realtime, self.read_ns)
        return pkg.response(
            schedule.status,
            headers=headers,
            stream=stream,
            request=self.request,
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": schedule.reason.encode("latin-1", "replace"),
            },
        )


class ReplayTransport(ReplayDriver, _ClientTransport):
    """An httpx / httpx2 transport that answers from a cassette, for sync and
    async clients alike (``Client`` and ``AsyncClient``).

    ``ReplayTransport(cassette, profile="faithful", *, realtime=True,
    ignore_fields=(), match_headers=(), strict=False, strict_nulls=False, seed=None,
    no_match=422, package=None)``. ``package`` forces ``"httpx"`` or
    ``"httpx2"``; by default it follows the class of each request, so one
    transport serves both kinds of client::

        t = ReplayTransport("chat.tape", "instant")
        httpx.Client(transport=t)              # ollama.Client(transport=t) too
        httpx.AsyncClient(transport=t)
        httpx2.Client(transport=t)             # openai.OpenAI(http_client=...)
        httpx2.AsyncClient(transport=t)        # anthropic.AsyncAnthropic(http_client=...)

    Each of these type-checks under ``mypy --strict``: to type checkers the
    class is an ``httpx.BaseTransport``, an ``httpx.AsyncBaseTransport`` and
    httpx2's two as well, and ``handle_request(request)`` returns the
    ``Response`` of the request's own package. At runtime it is duck-typed,
    as the clients only call its methods: ``isinstance(t, httpx.BaseTransport)``
    is False, and importing it imports neither httpx nor httpx2.
    ``AsyncReplayTransport`` is the same class.
    """

    def __init__(
        self,
        cassette: CassetteSource,
        profile: str | Profile = "faithful",
        *,
        realtime: bool = True,
        package: PackageName | None = None,
        **options: Unpack[MatchOptions],
    ) -> None:
        super().__init__(cassette, profile, realtime=realtime, **options)
        self.package = package

    def _open(self, request: HttpxRequest, body: bytes, t0: int) -> _Opening:
        name = self.package or type(request).__module__.partition(".")[0]
        pkg = _package(name)
        plan = self.replayer.plan(
            request.method, str(request.url), request.headers.multi_items(), body
        )
        read_ns = timeout_ns((request.extensions.get("timeout") or {}).get("read"))
        failure = head_failure(plan.schedule, read_ns)
        if failure is None:
            return _Opening(pkg, plan, request, t0, read_ns, t0 + plan.schedule.head_at_ns, None)
        exc = pkg.head_error(failure, request)
        return _Opening(pkg, plan, request, t0, read_ns, t0 + failure.at_ns, exc)

    @overload
    def handle_request(self, request: httpx.Request) -> httpx.Response: ...
    @overload
    def handle_request(self, request: httpx2.Request) -> httpx2.Response: ...
    def handle_request(self, request: HttpxRequest) -> HttpxResponse:
        t0 = time.perf_counter_ns()
        opening = self._open(request, request.read(), t0)
        if self.realtime:
            sleep_until_sync(opening.head_due_ns)
        return opening.response(self.realtime)

    @overload
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response: ...
    @overload
    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response: ...
    async def handle_async_request(self, request: HttpxRequest) -> HttpxResponse:
        t0 = time.perf_counter_ns()
        opening = self._open(request, await request.aread(), t0)
        if self.realtime:
            await sleep_until(opening.head_due_ns)
        return opening.response(self.realtime)

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()


AsyncReplayTransport = ReplayTransport
"""The same class: :class:`ReplayTransport` serves ``AsyncClient`` too. The name
reads well in async code and keeps older imports working."""
