"""The in-process recorder: mitmproxy in reverse mode in front of the upstream, on its own thread.

It is ``streamtape record`` without the terminal: the same
:class:`~streamtape.mitm.record.RecordAddon` with its redaction defaults, run by
:func:`~streamtape.mitm.proxy.run_proxy` on a background thread (its own event
loop), so a synchronous test, an asyncio test and an anyio test all reach it
over a real socket, and the proxy's event loop is never the test's.

For ``new_episodes`` the proxy also carries the
:class:`~streamtape.mitm.replay.ReplayAddon`: a request the cassette answers is
served by the replay server behind it (and is not recorded: the record
addon's filter skips flows that carry the replay addon's internal header); any
other request goes to the upstream and is recorded. So replayed interactions
are never recorded twice, and only new ones reach the new recording.

Recordings go to a private file (``.NAME.tape.<pid>.<n>.recording`` beside
the cassette) that :mod:`.tapes` commits to the cassette when the test is over.

The forwarding transports let code written against ``streamtape.transport()``
or ``.client()`` record unchanged: every request goes to the recorder, with
its path kept and its host replaced.

mitmproxy is imported when a recorder starts, never at import time.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import threading
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from ..cassette.model import Interaction, Outcome
from ..errors import StreamtapeError
from .sent import Answer, SentRequest, redacted

if TYPE_CHECKING:
    from ..match.matcher import Matcher

REPLAY_HEADER_FILTER = '!~hq "(?i)x-streamtape-replay"'
"""The record addon's filter: not the flows the replay addon answered (it sends them on with
this header). ``(?i)``: mitmproxy 11's ``~hq`` is case-sensitive (12's is not), and the header
goes out as ``X-Streamtape-Replay``; without it mitmproxy 11 recorded every replayed flow again."""


def stored_label(node_id: str) -> str:
    """The ``test`` label a recording of test ``node_id`` carries (a comma would split the option)."""
    return node_id.replace(",", " ")


class _Addon(Protocol):
    failed: str | None


class _ReplayAddon(_Addon, Protocol):
    matcher: Matcher | None


class _Watch:
    """A mitmproxy addon: what the test sent, in order, and when every flow has ended."""

    def __init__(self) -> None:
        self.master: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.sent: list[SentRequest] = []
        self.begun = 0
        self.ended = 0

    def running(self) -> None:
        from mitmproxy import ctx

        self.master = ctx.master
        self.loop = asyncio.get_running_loop()

    def request(self, flow: Any) -> None:
        r = flow.request
        index = flow.metadata.get("streamtape_replay")
        self.begun += 1
        self.sent.append(
            SentRequest(
                method=r.method,
                path=r.path,
                headers=redacted(r.headers.items(multi=True)),
                body=(r.raw_content or b"").decode("utf-8", "replace"),
                answer=Answer.REPLAYED if index is not None else Answer.RECORDED,
                interaction=index,
            )
        )

    def response(self, flow: Any) -> None:
        self.ended += 1

    def error(self, flow: Any) -> None:
        self.ended += 1


class ProxyRecorder:
    """Records what the test sends to ``upstream`` into ``out``; ``url`` is where to send it.

    ``replay`` (a cassette path) turns on replay-first (``new_episodes``):
    requests it answers are replayed under ``profile``, the rest recorded.
    ``label`` is stored with every recorded interaction (``test=<node id>``).
    """

    def __init__(
        self,
        upstream: str,
        out: Path,
        *,
        label: str,
        replay: Path | None = None,
        profile: str = "faithful",
        ignore_fields: tuple[str, ...] = (),
        match_headers: tuple[str, ...] = (),
        strict: bool = False,
        strict_nulls: bool = False,
    ) -> None:
        self.upstream = upstream
        self.out = out
        self.label = label
        self.replay = replay
        self.profile = profile
        self.ignore_fields = ignore_fields
        self.match_headers = match_headers
        self.strict = strict
        self.strict_nulls = strict_nulls
        self.url = ""
        self.recorded: list[Interaction] = []
        self.errors: list[str] = []
        self._watch = _Watch()
        self._replay_addon: _ReplayAddon | None = None
        self._addons: list[_Addon] = []
        self._ready = threading.Event()
        self._running = False
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> str:
        """Start the proxy; return its URL. Raises :class:`StreamtapeError` if it cannot run."""
        with warnings.catch_warnings():
            # mitmproxy imports ldap3, which uses names pyasn1 has deprecated: noise in
            # the test's warning summary that nobody running the test can act on.
            warnings.simplefilter("ignore", DeprecationWarning)
            from ..mitm.record import RecordAddon
            from ..mitm.replay import ReplayAddon

        options: dict[str, object] = {
            "streamtape_out": str(self.out),
            "streamtape_all": "true",  # the test replays non-streaming calls too
            "streamtape_label": [f"test={stored_label(self.label)}"],
        }
        if self.replay is not None:
            replay_addon = ReplayAddon(on_error=self._on_error)
            self._replay_addon = replay_addon
            self._addons.append(replay_addon)
            options.update(
                streamtape_cassette=[str(self.replay)],
                streamtape_profile=self.profile,
                streamtape_ignore_fields=list(self.ignore_fields),
                streamtape_match_headers=list(self.match_headers),
                streamtape_strict="true" if self.strict else "false",
                streamtape_strict_nulls="true" if self.strict_nulls else "false",
                streamtape_unmatched="passthrough",
                streamtape_filter=REPLAY_HEADER_FILTER,
            )
        # insecure_hint=None: the plugin has no switch to accept an upstream's self-signed certificate.
        self._addons.append(RecordAddon(on_finished=self.recorded.append, on_error=self._on_error,
                                        insecure_hint=None))
        addons = [*self._addons, self._watch]
        self._thread = threading.Thread(
            target=self._run, args=(addons, options), name="streamtape-recorder", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout):
            self.errors.append(f"the recorder did not start within {timeout:g} s")
        # Options arrive one update at a time, so an addon may complain before the
        # last one lands: what counts is whether it is still failing once running.
        self.errors.extend(a.failed for a in self._addons if a.failed)
        self._running = True
        if self.errors or not self.url:
            self.stop()
            detail = self.errors[0] if self.errors else "the recorder stopped at startup"
            raise StreamtapeError(f"cannot record into {self.out}: {detail}")
        return self.url

    def _on_error(self, message: str) -> None:
        if self._running:  # a write failure while recording (disk full, file gone)
            self.errors.append(message)

    def _run(self, addons: list[object], options: dict[str, object]) -> None:
        from ..mitm.proxy import run_proxy

        def running(addrs: list[tuple[str, int]]) -> None:
            host, port = addrs[0]
            self.url = f"http://{host}:{port}"
            self._ready.set()

        try:
            asyncio.run(
                run_proxy(
                    f"reverse:{self.upstream}", "127.0.0.1", 0, addons, on_running=running, options=options
                )
            )
        except StreamtapeError as e:
            self.errors.append(str(e))
        except Exception as e:  # mitmproxy refused an option: say it, never hang the test
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self._ready.set()

    def settle(self, timeout: float = 2.0) -> None:
        """Wait until every request the proxy has seen has ended (its interaction is
        recorded): the client may read the last byte a moment before mitmproxy's
        ``response`` hook runs."""
        deadline = time.monotonic() + timeout
        while self._watch.ended < self._watch.begun and time.monotonic() < deadline:
            time.sleep(0.005)

    def stop(self) -> None:
        """Stop the proxy and close the recording file (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self.settle()
        loop, master = self._watch.loop, self._watch.master
        if loop is not None and master is not None and thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop is closed already
                loop.call_soon_threadsafe(master.shutdown)
        thread.join(30)

    # -- what happened -----------------------------------------------------------

    @property
    def sent(self) -> list[SentRequest]:
        return list(self._watch.sent)

    @property
    def replay_matcher(self) -> Matcher | None:
        """The matcher of the replay-first part (``new_episodes``), or None."""
        return self._replay_addon.matcher if self._replay_addon is not None else None

    def upstream_failures(self) -> list[str]:
        """One line per recorded request the upstream did not answer."""
        out = []
        for ix in list(self.recorded):
            if ix.response is None or ix.outcome is Outcome.UPSTREAM_ERROR:
                why = ix.error or "no response"
                out.append(
                    f"{ix.request.method} {urlsplit(ix.request.url).path}: "
                    f"the upstream {self.upstream} did not answer ({why})"
                )
        return out


# -- transports that send everything to the recorder ------------------------------


def rebase(url: str, base: str) -> str:
    """``url`` with the scheme and host of ``base`` (path, query and fragment kept)."""
    u, b = urlsplit(url), urlsplit(base)
    return urlunsplit((b.scheme, b.netloc, u.path, u.query, u.fragment))


def _package_of(request: object) -> ModuleType:
    return importlib.import_module(type(request).__module__.split(".")[0])


class _Rebase:
    def __init__(self, base: str) -> None:
        b = urlsplit(base)
        self.scheme = b.scheme
        self.host = b.hostname or "127.0.0.1"
        self.port = b.port

    def apply(self, request: Any) -> None:
        request.url = request.url.copy_with(scheme=self.scheme, host=self.host, port=self.port)


class ForwardingTransport:
    """A sync httpx / httpx2 transport sending every request to ``base`` (the recorder).

    One object serves both packages (it follows the class of each request),
    like :class:`~streamtape.ReplayTransport`, so a test passes
    ``streamtape.transport()`` to whichever client it uses, recording or not.
    """

    def __init__(self, base: str) -> None:
        self._rebase = _Rebase(base)
        self._inner: dict[str, Any] = {}

    def handle_request(self, request: Any) -> Any:
        pkg = _package_of(request)
        inner = self._inner.get(pkg.__name__)
        if inner is None:
            inner = self._inner[pkg.__name__] = pkg.HTTPTransport()
        self._rebase.apply(request)
        return inner.handle_request(request)

    def close(self) -> None:
        for t in self._inner.values():
            t.close()
        self._inner.clear()

    def __enter__(self) -> ForwardingTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncForwardingTransport:
    """The async twin of :class:`ForwardingTransport`."""

    def __init__(self, base: str) -> None:
        self._rebase = _Rebase(base)
        self._inner: dict[str, Any] = {}

    async def handle_async_request(self, request: Any) -> Any:
        pkg = _package_of(request)
        inner = self._inner.get(pkg.__name__)
        if inner is None:
            inner = self._inner[pkg.__name__] = pkg.AsyncHTTPTransport()
        self._rebase.apply(request)
        return await inner.handle_async_request(request)

    async def aclose(self) -> None:
        for t in self._inner.values():
            await t.aclose()
        self._inner.clear()

    async def __aenter__(self) -> AsyncForwardingTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def forwarding_adapter(base: str) -> Any:
    """A ``requests`` HTTPAdapter sending every request to ``base`` (requests imported here)."""
    from requests.adapters import HTTPAdapter

    class ForwardingAdapter(HTTPAdapter):
        def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
            request.url = rebase(request.url, base)
            return super().send(request, *args, **kwargs)

    return ForwardingAdapter()


__all__ = [
    "AsyncForwardingTransport",
    "ForwardingTransport",
    "ProxyRecorder",
    "forwarding_adapter",
    "rebase",
]
