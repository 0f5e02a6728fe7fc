"""pytest plugin: record a test's backend once, replay it offline under any profile.

Loaded by the ``pytest11`` entry point of the installed package (or
``-p streamtape.pytest_plugin``). The workflow is pytest-recording's: write
the test, run it once against the real backend, commit the cassette, and from
then on it replays offline, faithfully or under adversarial stream profiles::

    def test_chat(streamtape):
        client = openai.OpenAI(api_key=KEY, base_url=streamtape.url + "/v1")
        ...

    pytest --streamtape-record-mode=once --streamtape-upstream http://127.0.0.1:8080   # records
    pytest                                                # replays: cassettes/test_x/test_chat.tape
    pytest --streamtape-profile 'adversarial:*'           # replays under every adversarial profile

The ``streamtape`` fixture (:class:`~.session.Streamtape`)
------------------------------------------------------------
``.url``                 base URL of a replay server for this test (started on first use);
                         recording, of the in-process recorder in front of the upstream
``.ws_url``              the same as ``ws://``: WebSocket clients (the openai SDK's
                         ``websocket_base_url=``) get the recorded sessions from it
``.transport()``         an httpx / httpx2 transport (``.async_transport()``: async clients)
``.client()``            an httpx2 (else httpx) client on it (``.async_client()``)
``.adapter()``           a requests adapter (``.session()``: a Session with it mounted)
``.cassette``            the cassette (recording: plus what was recorded so far)
``.requests``            what the test sent, in order (:class:`~.sent.SentRequest`)
``.assert_all_played()`` fails naming the recorded interactions nobody requested
``.action``              ``replay``, ``record`` or ``extend`` (new_episodes)

Recording, the transports, clients and adapter send to the recorder, so the
same test code records and replays. The older fixtures stay, built on this
one: ``streamtape_cassette``, ``streamtape_profile``, ``streamtape_transport``,
``streamtape_async_transport``, ``streamtape_adapter``, ``streamtape_session``,
``streamtape_server`` (the URL).

Cassette
--------
``cassettes/<test module>/<test name>.tape`` beside the test file
(``Class.method.tape`` for a method); every parameter set of a test shares
it. The ini option ``streamtape_cassette_dir`` moves ``cassettes`` (relative to
the ini file). ``cassette=`` in the marker wins: a path relative to the test
file, a folder or a list (replay only).

Record modes (as pytest-recording's)
------------------------------------
``none`` (default)  replay only; a missing cassette, or a request no recording
                    matches, fails the test naming the cassette, the request,
                    the closest recording and how it differs
``once``            record if the cassette does not exist, else as ``none``
``new_episodes``    replay what matches; send the rest upstream and append it
``all``             record everything again; the new recording replaces the file

Chosen by ``record_mode=`` in the marker, else ``--streamtape-record-mode``,
else ``STREAMTAPE_RECORD_MODE``. The upstream: ``upstream=`` in the marker,
else ``--streamtape-upstream URL``, else ``STREAMTAPE_UPSTREAM``. Recording
redacts keys and tokens as ``streamtape record`` does. A recording becomes the
cassette only when the test passes (``.tape.failed`` keeps a failed test's
recording; see :mod:`.tapes`).

Marker
------
``@pytest.mark.streamtape(cassette=..., record_mode=..., upstream=...,
profile=... | profiles=..., realtime=True, ignore_fields=..., match_headers=...,
strict=False, strict_nulls=False, seed=None, no_match=422)`` on a test, class or module (the
nearest wins, argument by argument).

- ``profile``: one profile (``"faithful"``, ``"instant"``,
  ``"chunk=utf8-split;latency=instant"``...), or a list: the test runs once per
  profile (``"adversarial:*"`` in a list stands for the adversarial set).
- ``profiles``: the name of a profile set (``"adversarial"``: ids
  ``utf8-split``, ``bytes-1``...) or a list of profiles.
- ``--streamtape-profile P`` (repeatable) is the profile of every test whose
  marker names none; a marker's profile is part of what its test asserts.

A profile matrix records once (:mod:`.matrix_record`): under a mode that
records, the first case to run with no recording of its matrix in this run
(any order, ``-k``, pytest-xdist: decided under the cassette's lock) runs the
test against the upstream under ``faithful``, then again replaying the fresh
cassette under its own profile; every other case replays it. If that recording
run fails, its case reports the failure and the others fail in one line
naming it (:class:`~streamtape.errors.MatrixRecordError`). A test with one
profile that is not faithful (``profile="chunk=1"``, a one-member list, one
``--streamtape-profile``) records as a matrix of one: under ``faithful``,
then again replaying under its profile (its report is that run's), so the
client gets the profile's stream, not the upstream's. With one ``faithful``
profile (the default) a test records in its one run.

Misuse (an unknown profile, record mode or marker argument, recording without
an upstream or into a folder) is a collection error naming the value. At the
end of a run with a matrix, the terminal summary lists per test the profiles
it failed under.

This package imports only the standard library, pytest and streamtape's pure
modules at import time: httpx, httpx2, requests and mitmproxy are imported
when a test needs them.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..cassette.reader import Cassette
from ..errors import StreamtapeError
from .fixture import Streamtape
from .matrix import PROPERTY, MatrixResults
from .matrix_record import REPORTS, group_cases, matrix_param, matrix_profile, plan_of, run_case
from .settings import (
    ALL_ADVERSARIAL,
    INI_CASSETTE_DIR,
    MARKER,
    RECORD_MODES,
    MatrixProfile,
    RunOptions,
    TestSettings,
    expand_profiles,
    marker_kwargs,
    resolve,
)

__all__ = ["MARKER", "Streamtape", "expand_profiles"]

CASSETTE_PROPERTY = "streamtape_cassette"
WORKER_INPUT = "streamtape_run_started"

_RUN = pytest.StashKey[RunOptions]()
_STARTED = pytest.StashKey[float]()
_ACTIVE = pytest.StashKey[Streamtape]()


# -- options and configuration -------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamtape", "streamtape record and replay")
    group.addoption(
        "--streamtape-profile",
        action="append",
        default=None,
        metavar="PROFILE",
        help="replay profile for streamtape tests whose marker names none (repeatable; "
        f"'{ALL_ADVERSARIAL}' = every adversarial profile). Default: faithful.",
    )
    group.addoption(
        "--streamtape-record-mode",
        default=None,
        choices=RECORD_MODES,
        help="none (replay only, the default), once (record missing cassettes), "
        "new_episodes (record what the cassette cannot answer), all (record everything again). "
        "A marker's record_mode wins; default from STREAMTAPE_RECORD_MODE.",
    )
    group.addoption(
        "--streamtape-upstream",
        default=None,
        metavar="URL",
        help="the real backend a recording test talks to (default from STREAMTAPE_UPSTREAM).",
    )
    parser.addini(
        INI_CASSETTE_DIR,
        "folder of the default cassettes (<dir>/<test module>/<test>.tape), relative to the "
        "ini file; default: 'cassettes' beside each test file",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "streamtape(cassette=PATH, record_mode=MODE, upstream=URL, profile=P|[P...], "
        "profiles=SET|[P...], realtime=True, ...): the cassette, record mode and replay "
        "profile(s) of the streamtape fixture",
    )
    try:
        config.stash[_RUN] = RunOptions.of(config)
    except StreamtapeError as e:
        raise pytest.UsageError(str(e)) from None
    worker_input = getattr(config, "workerinput", None)
    started = worker_input.get(WORKER_INPUT) if isinstance(worker_input, dict) else None
    config.stash[_STARTED] = float(started) if started is not None else time.time()
    config.pluginmanager.register(_Summary(), f"streamtape-summary-{id(config)}")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker compares cassette times with the controller's start."""
    node.workerinput[WORKER_INPUT] = node.config.stash[_STARTED]


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    run = config.stash[_RUN]
    out = []
    if run.record_mode is not None:
        up = f", upstream {run.upstream}" if run.upstream else ""
        out.append(f"streamtape record mode: {run.record_mode.value} ({run.record_mode_source}){up}")
    if run.profiles:
        out.append(f"streamtape profile: {', '.join(run.profiles)}")
    return out or None


# -- collection ----------------------------------------------------------------------


def _settings(node: pytest.Item, config: pytest.Config) -> TestSettings:
    cls = getattr(node, "cls", None)
    name = getattr(node, "originalname", None) or node.name
    return resolve(marker_kwargs(node), config.stash[_RUN], node.path, cls.__name__ if cls else None, name)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "streamtape_profile" not in metafunc.fixturenames:
        return
    try:
        settings = _settings(metafunc.definition, metafunc.config)
    except StreamtapeError as e:
        # A collection error shown as this one line (no traceback).
        raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: streamtape: {e}") from None
    if settings.is_matrix:
        metafunc.parametrize(
            "streamtape_profile",
            list(settings.profiles),
            ids=[p.id for p in settings.profiles],
            indirect=True,
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        profile = matrix_param(item)
        if profile is not None:
            callspec = getattr(item, "callspec")  # noqa: B009 - a matrix case has one
            test = item.nodeid.partition("[")[0]
            shown = profile.id if len(callspec.params) == 1 else callspec.id
            item.user_properties.append((PROPERTY, [test, shown]))

    def settings_of(item: pytest.Item) -> TestSettings | None:
        try:
            return _settings(item, config)
        except StreamtapeError:
            return None  # the fixture fails the test with the message

    group_cases(items, settings_of)


# -- running -------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A profile matrix case that may record: the first case records, the rest replay; a test
    with one profile, not faithful, records as a matrix of one (.matrix_record)."""
    if matrix_profile(item) is None:
        return None
    try:
        settings = _settings(item, item.config)
    except StreamtapeError:
        return None  # the fixture fails the test with the message
    return run_case(item, nextitem, settings, item.config.stash[_STARTED], _show(item.config))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(REPORTS, {})[report.when] = report
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """A request no recording answered fails the test with streamtape's message, even
    when the code under test swallowed the no-match error or failed on it in its own words."""
    try:
        result = yield
    except (Exception, pytest.fail.Exception) as e:
        st = item.stash.get(_ACTIVE, None)
        problems = st.problems() if st is not None else []
        if problems:
            detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
            then = f"\n(the test then failed: {type(e).__name__}{': ' + detail if detail else ''})"
            raise pytest.fail.Exception("streamtape: " + "\n".join(problems) + then, pytrace=False) from e
        raise
    st = item.stash.get(_ACTIVE, None)
    problems = st.problems() if st is not None else []
    if problems:
        pytest.fail("streamtape: " + "\n".join(problems), pytrace=False)
    return result


class _Summary:
    """Collects, from every test's reports, the cassettes written and the matrix outcomes,
    and prints them at the end. Reports are what a pytest-xdist controller sees, so the
    data rides in their ``user_properties``."""

    def __init__(self) -> None:
        self.matrix = MatrixResults()
        self.cassettes: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PROPERTY and isinstance(value, list | tuple) and len(value) == 2:
                self.matrix.add(report.nodeid, str(value[0]), str(value[1]), report.when, report.failed, report.skipped)
            elif name == CASSETTE_PROPERTY and report.when == "teardown":
                self.cassettes.append(str(value))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.cassettes:
            terminalreporter.section("streamtape cassettes")
            for line in self.cassettes:
                terminalreporter.line(line)
        if self.matrix.rows:
            n = len(self.matrix.rows)
            terminalreporter.section("streamtape profile matrix")
            for line in self.matrix.lines():
                terminalreporter.line(line)
            terminalreporter.line(
                f"{self.matrix.failed_tests} of {n} test{'s' if n != 1 else ''} failed under some profile"
            )


# -- fixtures ------------------------------------------------------------------------


def _show(config: pytest.Config) -> Any:
    root = config.rootpath

    def show(path: Path) -> str:
        try:
            return str(path.relative_to(root))
        except ValueError:
            return str(path)

    return show


@pytest.fixture
def streamtape_profile(request: pytest.FixtureRequest) -> str:
    """The profile this test runs under (parametrized when there are several)."""
    param = getattr(request, "param", None)
    plan = plan_of(request.node)
    if plan is not None and plan.profile is not None:
        return plan.profile  # the run that records a profile matrix: faithful
    if isinstance(param, MatrixProfile):
        return param.text
    if param is not None:
        return str(param)
    try:
        settings = _settings(request.node, request.config)
    except StreamtapeError as e:
        pytest.fail(f"{request.node.nodeid}: streamtape: {e}", pytrace=False)
    return settings.profiles[0].text


@pytest.fixture
def streamtape(request: pytest.FixtureRequest, streamtape_profile: str) -> Iterator[Streamtape]:
    """This test's cassette, replay server, transports and recorder (see the module docstring)."""
    failure = None
    plan = plan_of(request.node)
    try:
        settings = _settings(request.node, request.config)
    except StreamtapeError as e:
        failure = f"streamtape: {e}"
    if failure is None and plan is not None and plan.failure is not None:
        failure = f"streamtape: {plan.failure}"
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    st = Streamtape(
        settings,
        streamtape_profile,
        node_id=request.node.nodeid,
        run_started=request.config.stash[_STARTED],
        show=_show(request.config),
        action=plan.action if plan is not None else None,
    )
    item = request.node
    item.stash[_ACTIVE] = st
    try:
        yield st
    finally:
        del item.stash[_ACTIVE]
        reports = item.stash.get(REPORTS, {})
        call = reports.get("call")
        passed = call is not None and call.passed
        failure = None
        try:
            line = st.close(passed)
        except StreamtapeError as e:
            line, failure = None, f"streamtape: {e}"
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        if line is not None:
            if plan is not None and plan.recorded_for is not None and not line.endswith("nothing recorded"):
                line += f" (recorded by {item.nodeid} under faithful for {plan.recorded_for})"
            item.user_properties.append((CASSETTE_PROPERTY, line))


@pytest.fixture
def streamtape_cassette(streamtape: Streamtape) -> Cassette:
    """The loaded :class:`~streamtape.Cassette` (``streamtape.cassette``)."""
    return streamtape.cassette


@pytest.fixture
def streamtape_transport(streamtape: Streamtape) -> Any:
    """``streamtape.transport()``: for ``httpx.Client`` / ``httpx2.Client(transport=...)``."""
    return streamtape.transport()


@pytest.fixture
def streamtape_async_transport(streamtape: Streamtape) -> Any:
    """``streamtape.async_transport()``: for ``httpx.AsyncClient`` / ``httpx2.AsyncClient``."""
    return streamtape.async_transport()


@pytest.fixture
def streamtape_adapter(streamtape: Streamtape) -> Any:
    """``streamtape.adapter()``: a requests HTTPAdapter to mount on a Session."""
    return streamtape.adapter()


@pytest.fixture
def streamtape_session(streamtape: Streamtape) -> Any:
    """``streamtape.session()``: a requests.Session answering every http(s):// request."""
    return streamtape.session()


@pytest.fixture
def streamtape_server(streamtape: Streamtape) -> str:
    """``streamtape.url``: the base URL (``http://127.0.0.1:PORT``) of this test's replay server.

    Requests may carry ``X-Streamtape-Profile`` to change the profile per request.
    """
    return streamtape.url
