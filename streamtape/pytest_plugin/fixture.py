"""The ``streamtape`` fixture's object: one test's cassette, replay drivers and recorder.

Everything starts on first use and stops when the test ends: a test that only
uses ``.transport()`` never opens a socket, one that uses ``.url`` gets a
replay server (or, recording, the in-process recorder) of its own, on a free
port of its own process, so pytest-xdist workers never share one.

Every replay driver of a test (server, transports, adapter) shares one
:class:`~streamtape.match.matcher.Matcher`: the test talks to one backend, so the
repeat order of identical requests, ``.requests`` and ``.assert_all_played()``
cover all of them together.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest

from ..cassette.model import Interaction
from ..cassette.reader import Cassette, load, load_many
from ..errors import CassetteError, StreamtapeError
from ..match.matcher import Matcher
from ..wire import NO_MATCH_STATUS
from .recorder import (
    AsyncForwardingTransport,
    ForwardingTransport,
    ProxyRecorder,
    forwarding_adapter,
)
from .sent import Answer, SentRequest, from_matcher_entry
from .settings import RecordMode, TestSettings
from .tapes import Action, Outcome, commit, decide, discard, recording_path

if TYPE_CHECKING:
    import httpx
    import httpx2
    import requests

    from ..serve import ReplayServer
    from ..transport import ReplayDriver, ReplayTransport

_Driver = TypeVar("_Driver", bound="ReplayDriver")

BASE_URL = "http://streamtape.test"
"""The base URL of ``.client()`` clients: their transport answers (or forwards)
every request whatever its host, so only paths matter."""


class Streamtape:
    """One test's view of streamtape (the ``streamtape`` fixture).

    ``.url``: a replay server for this test, or in a recording mode the
    recorder in front of the upstream. ``.transport()`` / ``.async_transport()``
    / ``.client()`` / ``.async_client()`` / ``.adapter()`` / ``.session()``:
    in-process replay (recording: the same objects send to the recorder).
    ``.cassette``, ``.requests``, ``.assert_all_played()``: what there is and
    what happened. ``.action`` says which way this test runs: from the record mode and
    the cassette (:func:`~.tapes.decide`), unless the caller gives it (a profile matrix's
    cases replay the one recording their first case made, :mod:`.matrix_record`).
    """

    def __init__(
        self,
        settings: TestSettings,
        profile: str,
        *,
        node_id: str,
        run_started: float,
        show: Callable[[Path], str] = str,
        action: Action | None = None,
    ) -> None:
        self.settings = settings
        self.profile = profile
        self.record_mode: RecordMode = settings.record_mode
        self.path: Path = settings.cassette
        self.action: Action = action or decide(settings.record_mode, settings.cassette, run_started)
        self._node_id = node_id
        self._run_started = run_started
        self._show = show
        self._cassette: Cassette | None = None
        self._matcher: Matcher | None = None
        self._server: ReplayServer | None = None
        self._recorder: ProxyRecorder | None = None
        self._recording: Path | None = None
        self._closers: list[Callable[[], object]] = []

    def __repr__(self) -> str:
        return f"<streamtape {self.action.value} {self._show(self.path)} profile={self.profile!r}>"

    @property
    def recording(self) -> bool:
        """Whether this test talks to the upstream (``record`` or ``extend``)."""
        return self.action is not Action.REPLAY

    # -- replay side -------------------------------------------------------------

    def _fail(self, message: str) -> NoReturn:
        pytest.fail(f"streamtape: {message}", pytrace=False)

    def _file_cassette(self) -> Cassette:
        """The cassette file(s) as they were when the test started (loaded once)."""
        if self._cassette is not None:
            return self._cassette
        paths = self.settings.cassettes
        failure = None
        try:
            if self.action is not Action.REPLAY and not self.path.exists():
                cas = Cassette([], path=self.path)
            elif len(paths) == 1 and not paths[0].is_dir():
                cas = load(paths[0])
            else:
                parts = load_many(paths)
                cas = Cassette([ix for c in parts for ix in c], path=paths[0])
                cas.warnings = [w for c in parts for w in c.warnings]
        except CassetteError as e:
            failure = self._missing() if not paths[0].exists() else str(e)
        if failure is not None:
            self._fail(failure)
        self._cassette = cas
        return cas

    def _missing(self) -> str:
        return (
            f"{self._show(self.path)}: no such cassette file ({self.settings.mode_text()} replays only: "
            "record it with --streamtape-record-mode=once --streamtape-upstream URL)"
        )

    def _shared_matcher(self) -> Matcher:
        if self._matcher is None:
            s = self.settings
            self._matcher = Matcher(
                self._file_cassette(), ignore_fields=s.ignore_fields, match_headers=s.match_headers, strict=s.strict,
                strict_nulls=s.strict_nulls,
            )
        return self._matcher

    def _replay_options(self) -> dict[str, Any]:
        s = self.settings
        return {
            "ignore_fields": s.ignore_fields,
            "match_headers": s.match_headers,
            "strict": s.strict,
            "strict_nulls": s.strict_nulls,
            "seed": s.seed,
            "no_match": s.no_match,
        }

    def _on_shared_matcher(self, driver: _Driver) -> _Driver:
        """A replay driver answering from this test's one matcher."""
        driver.replayer.matcher = self._shared_matcher()
        return driver

    # -- recording side ------------------------------------------------------------

    def _proxy(self) -> ProxyRecorder:
        if self._recorder is None:
            s = self.settings
            upstream = s.upstream
            if upstream is None:  # collection checks this; the cassette may have gone since
                self._fail(
                    f"{s.mode_text()} must record {self._show(self.path)} but has no upstream: "
                    "--streamtape-upstream URL, STREAMTAPE_UPSTREAM or upstream= in the marker"
                )
            replay = self.path if self.action is Action.EXTEND and self.path.exists() else None
            if replay is not None:
                self._file_cassette()  # a corrupt cassette fails here, with its own message
            self._recording = recording_path(self.path)
            recorder = ProxyRecorder(
                upstream,
                self._recording,
                label=self._node_id,
                replay=replay,
                profile=self.profile,
                ignore_fields=s.ignore_fields,
                match_headers=s.match_headers,
                strict=s.strict,
                strict_nulls=s.strict_nulls,
            )
            self._recorder = recorder
            try:
                recorder.start()
            except StreamtapeError as e:
                self._fail(str(e))
        return self._recorder

    # -- the faces -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL (``http://127.0.0.1:PORT``) of this test's replay server, or recorder."""
        if self.recording:
            return self._proxy().url
        if self._server is None:
            from ..serve import ReplayServer

            name = self.path.name
            matcher = self._shared_matcher()
            status = self.settings.no_match  # "raise" cannot reach the client: it gets the default
            server = ReplayServer(matcher, profile=self.profile, sources=[name] * len(matcher.interactions),
                                  no_match_status=status if isinstance(status, int) else NO_MATCH_STATUS)
            server.__enter__()
            self._server = server
        return self._server.url

    @property
    def ws_url(self) -> str:
        """:attr:`url` as ``ws://127.0.0.1:PORT``, for WebSocket clients: the replay server
        plays a recorded session to an upgrade on its recorded path (recording: the recorder)."""
        return "ws" + self.url[len("http") :]

    def transport(self) -> ReplayTransport | ForwardingTransport:
        """An httpx / httpx2 transport: replays the cassette (recording: sends to the recorder)."""
        if self.recording:
            t = ForwardingTransport(self._proxy().url)
            self._closers.append(t.close)
            return t
        from ..transport import ReplayTransport

        return self._on_shared_matcher(
            ReplayTransport(self._file_cassette(), self.profile, realtime=self.settings.realtime, **self._replay_options())
        )

    def async_transport(self) -> ReplayTransport | AsyncForwardingTransport:
        """The async twin of :meth:`transport` (``httpx.AsyncClient`` / ``httpx2.AsyncClient``)."""
        if self.recording:
            return AsyncForwardingTransport(self._proxy().url)
        from ..transport import AsyncReplayTransport

        return self._on_shared_matcher(
            AsyncReplayTransport(
                self._file_cassette(), self.profile, realtime=self.settings.realtime, **self._replay_options()
            )
        )

    def client(self, **kwargs: Any) -> httpx2.Client | httpx.Client:
        """An ``httpx2.Client`` (``httpx.Client`` without httpx2) on :meth:`transport`, closed
        after the test; ``base_url`` is ``http://streamtape.test`` unless given."""
        pkg = _client_package()
        kwargs.setdefault("base_url", BASE_URL)
        client = pkg.Client(transport=self.transport(), **kwargs)
        self._closers.append(client.close)
        return client  # type: ignore[no-any-return]

    def async_client(self, **kwargs: Any) -> httpx2.AsyncClient | httpx.AsyncClient:
        """An ``httpx2.AsyncClient`` (or ``httpx.AsyncClient``) on :meth:`async_transport`.
        Close it in the test (``async with``): its connections belong to the test's loop."""
        pkg = _client_package()
        kwargs.setdefault("base_url", BASE_URL)
        return pkg.AsyncClient(transport=self.async_transport(), **kwargs)  # type: ignore[no-any-return]

    def adapter(self) -> requests.adapters.HTTPAdapter:
        """A ``requests`` transport adapter: replays (recording: sends to the recorder)."""
        if self.recording:
            a = forwarding_adapter(self._proxy().url)
        else:
            from ..transport import ReplayAdapter

            a = self._on_shared_matcher(
                ReplayAdapter(self._file_cassette(), self.profile, realtime=self.settings.realtime, **self._replay_options())
            )
        self._closers.append(a.close)
        return a  # type: ignore[no-any-return]

    def session(self) -> requests.Session:
        """A ``requests.Session`` with :meth:`adapter` on http:// and https://, closed after the test."""
        import requests

        session = requests.Session()
        a = self.adapter()
        session.mount("http://", a)
        session.mount("https://", a)
        self._closers.append(session.close)
        return session

    # -- what happened ---------------------------------------------------------------

    @property
    def recorded(self) -> list[Interaction]:
        """The interactions this test has recorded so far (empty when it replays)."""
        if self._recorder is None:
            return []
        self._recorder.settle()
        return list(self._recorder.recorded)

    @property
    def cassette(self) -> Cassette:
        """What answers this test: the cassette file as it was when the test started, plus
        (recording) what the test has recorded so far, in the order the file will have."""
        if self.action is Action.REPLAY:
            return self._file_cassette()
        base = list(self._file_cassette()) if self.action is Action.EXTEND else []
        return Cassette([*base, *self.recorded], path=self.path)

    @property
    def requests(self) -> list[SentRequest]:
        """What the test sent so far, in order, with who answered each request."""
        if self._recorder is not None:
            self._recorder.settle()
            return self._recorder.sent
        if self._matcher is None:
            return []
        return [from_matcher_entry(e) for e in self._matcher.received]

    def _played_matcher(self) -> Matcher | None:
        if self._recorder is not None:
            return self._recorder.replay_matcher
        return self._matcher

    def assert_all_played(self) -> None:
        """Fail the test naming every interaction of the cassette that no request asked for.

        Recording (``once`` creating, ``all``) everything recorded was asked for, so it passes.
        """
        if self.action is Action.RECORD:
            return
        matcher = self._played_matcher()
        if matcher is None:
            if self.action is Action.EXTEND and not self.path.exists():
                return
            matcher = self._shared_matcher()
        never = [i for i, n in enumerate(matcher.used) if n == 0]
        if never:
            lines = [
                f"#{i} {ix.request.method} {ix.request.path}"
                for i in never
                for ix in [matcher.interactions[i]]
            ]
            n = len(never)
            self._fail(
                f"{self._show(self.path)}: {n} recorded interaction{'s' if n > 1 else ''} never "
                f"requested: {'; '.join(lines)}"
            )

    def problems(self) -> list[str]:
        """Why the test must fail whatever it asserted: requests no recording answered
        (replay), requests the upstream did not answer and lost writes (recording)."""
        out: list[str] = []
        if self._recorder is not None:
            self._recorder.settle()
            out.extend(self._recorder.upstream_failures())
            out.extend(self._recorder.errors)
        elif self._matcher is not None:
            for r in self.requests:
                if r.answer is Answer.UNMATCHED:
                    out.append(f"{self._show(self.path)}: {r.error or f'no recording matches {r.line()}'}")
        return out

    # -- the end ---------------------------------------------------------------------

    def close(self, passed: bool) -> str | None:
        """Stop everything; commit a recording when the test passed. Returns a line saying
        what happened to the cassette (for the test's report), or None."""
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):  # a client the test closed already
                close()
        self._closers.clear()
        if self._server is not None:
            self._server.__exit__(None, None, None)
            self._server = None
        if self._recorder is None or self._recording is None:
            return None
        self._recorder.stop()
        recording, self._recording = self._recording, None
        n = len(self._recorder.recorded)
        if not recording.exists():
            return f"{self._show(self.path)}: nothing recorded"
        try:
            outcome = commit(recording, self.path, self.record_mode, passed=passed, run_started=self._run_started)
        except StreamtapeError:
            discard(recording)
            raise
        what = f"{n} interaction{'s' if n != 1 else ''}"
        if outcome is Outcome.KEPT:
            state = "unchanged" if self.path.exists() else "not written"
            return (
                f"{self._show(self.path)} {state}: the test failed; its recording ({what}) "
                f"is in {self._show(self.path)}.failed"
            )
        return f"{self._show(self.path)}: {outcome.value} with {what} from {self.settings.upstream}"


def _client_package() -> Any:
    try:
        import httpx2

        return httpx2
    except ImportError:
        import httpx

        return httpx
