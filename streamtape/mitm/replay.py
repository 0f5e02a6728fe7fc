"""Replay through mitmproxy: answer matching requests from cassettes, pass (or refuse) the rest.

    mitmdump -s addons/replay.py --set streamtape_cassette=FILE [--set streamtape_profile=P]

How a streamed answer gets out of mitmproxy: a response an addon sets in the
``request`` hook is sent whole (``send_response`` writes headers and the full
body at once), and the ``.stream`` callable only runs on bytes read from a
server. So the addon runs a :class:`~streamtape.serve.ReplayServer` on
127.0.0.1 (a free port, the proxy's own event loop) and, for a request that
matches, points the flow at it: ``scheme/host/port`` rewritten, plus an
internal ``X-Streamtape-Replay: TOKEN:INDEX`` header naming the interaction
the addon matched (so matching and the repeat order happen once, here). The
flow is streamed (``response.stream = True``), so every step the replay
server writes on time leaves the proxy as it arrives: the same pieces, the
same timing, the same profiles, plus the proxy's own time.

That is the slow path. A connection whose first request a recording answers
takes the fast one (:mod:`streamtape.mitm.direct`): mitmproxy relays its bytes
to the replay server below its HTTP layer, and the replay server reads the
requests itself, so a piece costs mitmproxy a read and a write instead of a
trip through its HTTP layer.

Unmatched requests go upstream untouched (``streamtape_unmatched=passthrough``,
the default) or get an error naming the closest recorded request (``refuse``):
status ``streamtape_no_match_status`` (422 by default, see
:data:`~streamtape.wire.NO_MATCH_STATUS`), the explanation in the error shape
of the request's API (:func:`~streamtape.wire.error_body`).

Faults cross the proxy as well as a proxy lets them: a cut reaches the client
as a body that ends without its terminating chunk; a reset is seen by
mitmproxy, which then closes the client connection (a proxy does not relay
RSTs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Sequence
from enum import StrEnum

from mitmproxy import ctx, http
from mitmproxy.addonmanager import Loader
from mitmproxy.proxy import layer, server_hooks

from ..capture.upstream_error import upstream_error_message
from ..cassette.reader import load_many
from ..errors import NoMatchError, OptionError, StreamtapeError
from ..fmt import warning_lines
from ..match.indexed import CassetteChain, interactions_of, matcher_for
from ..match.matcher import Matcher
from ..profiles import Profile, parse_profile
from ..serve import ReplayServer
from ..serve.request import HTTPRequest
from ..wire import ERROR_HEADERS, ERROR_STATUSES, NO_MATCH_STATUS, error_body
from . import error_answer
from .direct import DirectRoutes, pass_on, recorded_hosts
from .options import FailLoudly, OptStr, parse_bool, split_values

log = logging.getLogger(__name__)


class Unmatched(StrEnum):
    """What the addon does with a request no recording answers (``streamtape_unmatched``)."""

    PASSTHROUGH = "passthrough"
    """Send it upstream untouched."""
    REFUSE = "refuse"
    """Answer ``streamtape_no_match_status`` with an error naming the closest recording."""


UNMATCHED: tuple[Unmatched, ...] = tuple(Unmatched)


READY_TIMEOUT_S = 10.0
"""How long a request that arrived during startup waits for the replay server."""


class ReplayAddon(FailLoudly):
    """mitmproxy addon answering matching flows from cassettes (see the module docstring).

    ``on_line`` receives one line per request (served, passed through or
    refused) and ``on_error`` a configuration failure; without them both go
    to mitmproxy's log (errors at ERROR level, which makes mitmdump exit at
    startup).
    """

    activity = "replay"

    def __init__(
        self,
        on_line: Callable[[str], None] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(on_error)
        self.on_line = on_line
        self.server: ReplayServer | None = None
        # Set once the replay server listens. mitmproxy accepts connections
        # before the ``running`` hook has started it: a request in that window
        # waits for it rather than being passed upstream unreplayed.
        self._ready = asyncio.Event()
        self.matcher: Matcher | None = None
        self.profile: Profile = parse_profile("faithful")
        self.unmatched = Unmatched.PASSTHROUGH
        self.no_match_status = NO_MATCH_STATUS
        self._names: list[str | None] = []
        self._token = secrets.token_hex(8)
        self._config_key: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], bool, bool] | None = None
        self.routes = DirectRoutes()
        self._hosts: set[tuple[str, int]] | None = None
        self._counts = {"replayed": 0, "passthrough": 0, "refused": 0}
        self._answering = False  # error_answer is installed: passed requests' upstream errors in JSON

    @property
    def stats(self) -> dict[str, int]:
        """Requests replayed (by either path), passed upstream and refused so far."""
        served = self.server.stats.served if self.server is not None else 0
        return {**self._counts, "replayed": self._counts["replayed"] + served}

    # -- options ----------------------------------------------------------------

    def load(self, loader: Loader) -> None:
        # A request passed upstream that gets no response: JSON for its client, as the
        # recorder answers (streamtape.mitm.error_answer), not mitmproxy's HTML page.
        if not self._answering:
            self._answering = error_answer.install()
        loader.add_option(
            "streamtape_cassette", Sequence[str], [],
            "Cassette files or folders to replay (repeat, or separate with commas).",
        )
        loader.add_option(
            "streamtape_profile", str, "faithful",
            "Replay profile: a preset name or key=value items (see 'streamtape profiles').",
        )
        loader.add_option(
            "streamtape_ignore_fields", Sequence[str], [],
            "JSON request-body fields ignored when matching.",
        )
        loader.add_option(
            "streamtape_match_headers", Sequence[str], [],
            "Request headers compared when matching.",
        )
        loader.add_option(
            "streamtape_strict", OptStr, "false",
            "true: running out of recorded repeats of a request is a no-match.",
        )
        loader.add_option(
            "streamtape_strict_nulls", OptStr, "false",
            "true: a JSON null in a recorded request body matches only a null, not an absent field.",
        )
        loader.add_option(
            "streamtape_unmatched", str, "passthrough",
            "What to do with a request no recording answers: passthrough (send it upstream) "
            "or refuse (an error naming the closest recording).",
        )
        loader.add_option(
            "streamtape_no_match_status", OptStr, str(NO_MATCH_STATUS),
            "With refuse: the status of the error (400 to 599; not 404, which SDKs report as "
            "a missing model, nor a 5xx, which they retry).",
        )

    def configure(self, updated: set[str]) -> None:
        if not any(k.startswith("streamtape_") for k in updated) and self._config_key:
            return
        try:
            self._configure()
        except StreamtapeError as e:
            self.fail(str(e))
            return
        self.failed = None

    def _configure(self) -> None:
        o = ctx.options
        try:
            unmatched = Unmatched(o.streamtape_unmatched.strip().lower())
        except ValueError:
            raise OptionError(
                f"streamtape_unmatched: expected passthrough or refuse, got {o.streamtape_unmatched!r}"
            ) from None
        strict = parse_bool("streamtape_strict", o.streamtape_strict)
        strict_nulls = parse_bool("streamtape_strict_nulls", o.streamtape_strict_nulls)
        status = (o.streamtape_no_match_status or "").strip()
        if not status.isdigit() or int(status) not in ERROR_STATUSES:
            raise OptionError(f"streamtape_no_match_status: expected an error status, "
                              f"{ERROR_STATUSES.start} to {ERROR_STATUSES.stop - 1}, "
                              f"got {o.streamtape_no_match_status!r}")
        try:
            profile = parse_profile(o.streamtape_profile)
        except StreamtapeError as e:
            raise OptionError(f"streamtape_profile: {e}") from None
        paths = split_values(o.streamtape_cassette)
        key = (tuple(paths), tuple(o.streamtape_ignore_fields), tuple(o.streamtape_match_headers),
               strict, strict_nulls)
        if key != self._config_key:
            if not paths:
                raise OptionError("streamtape_cassette: no cassette given "
                                  "(--set streamtape_cassette=FILE)")
            try:
                cassettes = load_many(paths)
            except StreamtapeError as e:
                raise OptionError(f"streamtape_cassette: {e}") from None
            interactions, names = interactions_of(cassettes)  # large ones stay on disk
            for line in warning_lines(cassettes):
                log.warning(line)
            self.matcher = matcher_for(
                interactions,
                ignore_fields=split_values(o.streamtape_ignore_fields),
                match_headers=split_values(o.streamtape_match_headers),
                strict=strict,
                strict_nulls=strict_nulls,
                sources=names,
            )
            self._names = names
            self._hosts = None
            self._config_key = key
            if self.server is not None:
                self.server.replace_matcher(self.matcher, self._names)
        self.profile = profile
        self.unmatched = unmatched
        self.no_match_status = int(status)
        if self.server is not None:
            self.server.profile = profile
            self.server.no_match_status = self.no_match_status

    async def running(self) -> None:
        self.check_deferred()
        if self.failed is None and self.matcher is None:
            self.fail("streamtape_cassette: no cassette given (--set streamtape_cassette=FILE)")
        if self.stop_if_failed() or self.matcher is None:
            self._ready.set()  # nothing to wait for: waiting requests go on
            return
        # Connect upstream only when a passed-through request needs it: an
        # offline test must not depend on the recorded host resolving.
        with contextlib.suppress(Exception):
            ctx.options.update(connection_strategy="lazy")
        server = ReplayServer(
            self.matcher,
            profile=self.profile,
            host="127.0.0.1",
            port=0,
            log=self._line,
            direct_token=self._token,
            sources=self._names,
            pass_on=self._pass_on,
            no_match_status=self.no_match_status,
        )
        await server.start()
        self.server = server  # only now: its port is bound
        self._ready.set()

    async def done(self) -> None:
        if self._answering:
            self._answering = False
            error_answer.uninstall()
        self._ready.set()
        if self.server is not None:
            await self.server.close()
            self._counts["replayed"] += self.server.stats.served
            self.server = None

    def _line(self, line: str) -> None:
        if self.on_line:
            self.on_line(line)
        else:
            log.info(f"streamtape: {line}")

    # -- connections: the fast path (streamtape.mitm.direct) ----------------------

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        if self.server is not None and self.matcher is not None and self.failed is None:
            self.routes.route(nextlayer, self.matcher, self.server, ctx.master.addons.get("proxyserver"))

    def http_connect(self, flow: http.HTTPFlow) -> None:
        if (self.server is None or self.matcher is None or self.failed is not None
                or flow.response is not None):  # another addon answered it (proxy auth)
            return
        if self._hosts is None:  # where the recordings were made: their tunnels are taken whole
            chain = self.matcher.interactions
            requests = chain.requests() if isinstance(chain, CassetteChain) else (
                ix.request for ix in chain)
            self._hosts = recorded_hosts(r.url for r in requests)
        tlsconfig = ctx.master.addons.get("tlsconfig")
        self.routes.tunnel((flow.request.host, flow.request.port), flow.client_conn, self.server,
                           ctx.master.addons.get("proxyserver"), getattr(tlsconfig, "certstore", None),
                           self._hosts)

    def server_connected(self, data: server_hooks.ServerConnectionHookData) -> None:
        self.routes.connected(data.server)

    def server_disconnected(self, data: server_hooks.ServerConnectionHookData) -> None:
        self.routes.disconnected(data.server)

    async def _pass_on(self, req: HTTPRequest, writer: asyncio.StreamWriter) -> bool | None:
        origin = self.routes.origin(writer)
        return None if origin is None else await pass_on(req, origin, writer)

    # -- flows ------------------------------------------------------------------

    def error(self, flow: http.HTTPFlow) -> None:
        """A request passed upstream got no response (refused, unresolvable, a certificate
        not trusted, closed before its head): its client is told why in JSON."""
        if (self._answering and flow.metadata.get("streamtape_passed") and flow.response is None
                and flow.request.timestamp_end is not None):
            msg = flow.error.msg if flow.error else "unknown error"
            error_answer.answer(flow, upstream_error_message(
                error_answer.upstream_of(flow), msg, proxy="replay proxy",
                insecure_hint="--set ssl_insecure=true accepts a backend with a self-signed certificate"))

    async def request(self, flow: http.HTTPFlow) -> None:
        if self.matcher is None or self.failed is not None or flow.response is not None:
            return
        if self.server is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), READY_TIMEOUT_S)
            if self.server is None:  # startup failed: mitmproxy is shutting down
                return
        r = flow.request
        if r.host in ("127.0.0.1", "localhost") and r.port == self.server.port:
            return
        try:
            index, _ix = self.matcher.match_indexed(
                r.method, r.pretty_url, list(r.headers.items(multi=True)), r.raw_content or b""
            )
        except NoMatchError as e:
            if self.unmatched is Unmatched.REFUSE:
                status = self.no_match_status
                flow.response = http.Response.make(
                    status, error_body(str(e), path=r.path), dict(ERROR_HEADERS)
                )
                self._counts["refused"] += 1
                self._line(f"{r.method} {r.pretty_url} refused ({status}): {e}")
            else:
                self._counts["passthrough"] += 1
                flow.metadata["streamtape_passed"] = True
                self._line(f"{r.method} {r.pretty_url} passed upstream: {e}")
            return
        flow.metadata["streamtape_replay"] = index
        r.headers["X-Streamtape-Replay"] = f"{self._token}:{index}"
        r.scheme = "http"
        r.host = "127.0.0.1"
        r.port = self.server.port

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if "streamtape_replay" in flow.metadata and flow.response is not None:
            # Forward every piece as it arrives: the replay server already times them.
            flow.response.stream = True
