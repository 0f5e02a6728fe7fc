"""pytest plugin: replay cassettes to the code under test, under any profile.

Enable it with ``-p streamtape.pytest_plugin`` on the command line, or
``pytest_plugins = ["streamtape.pytest_plugin"]`` in your top-level
``conftest.py`` (or through the ``pytest11`` entry point when the package
declares one).

Marker
------
``@pytest.mark.streamtape(cassette=..., profile=..., **options)`` on a test,
class or module:

- ``cassette``: a ``.tape`` path relative to the test file's folder (or
  absolute), a folder of them, or a list of paths.
- ``profile``: a profile text or preset name (``"faithful"``, ``"instant"``,
  ``"chunk=utf8-split;latency=instant"``...), or a list of them: the test
  runs once per profile. ``"adversarial:*"`` stands for every profile of
  :data:`streamtape.profiles.ADVERSARIAL` (ids ``adversarial:<name>``).
- options: ``realtime`` (default True: the profile's timing is honoured;
  False plays on a virtual clock, where read timeouts still apply),
  ``ignore_fields``, ``match_headers``, ``strict``, ``seed``, ``no_match``
  (``"404"`` or ``"raise"``), as for :class:`streamtape.ReplayTransport`.

Command line
------------
``--streamtape-profile PROFILE`` (repeatable): the profile(s) for tests whose
marker names none (default ``faithful``). ``--streamtape-profile
'adversarial:*'`` runs every streamtape test once per adversarial profile.
A profile given in a marker wins over the command line.

Fixtures
--------
``streamtape_cassette``        the loaded :class:`~streamtape.Cassette`
``streamtape_profile``         the profile text this test runs under
``streamtape_transport``       a :class:`~streamtape.ReplayTransport` (httpx or httpx2 clients)
``streamtape_async_transport`` a :class:`~streamtape.AsyncReplayTransport`
``streamtape_adapter``         a :class:`~streamtape.ReplayAdapter` (requests)
``streamtape_session``         a ``requests.Session`` with the adapter mounted on http:// and https://
``streamtape_server``          the base URL (``http://127.0.0.1:PORT``) of a replay server
                               (:class:`streamtape.serve.ReplayServer`) running for this test

Example::

    @pytest.mark.streamtape(cassette="cassettes/chat.tape", profile="adversarial:*")
    def test_chat_survives_any_chunking(streamtape_transport):
        client = openai.OpenAI(api_key="x", base_url="http://llm.test/v1",
                               http_client=httpx2.Client(transport=streamtape_transport))
        ...

This module imports only the standard library, pytest and streamtape at
import time: httpx, httpx2 and requests are imported when a fixture needs them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from .cassette import Cassette, load, load_many
from .errors import StreamtapeError

MARKER = "streamtape"
ALL_ADVERSARIAL = "adversarial:*"
_OPTIONS = ("ignore_fields", "match_headers", "strict", "seed", "no_match")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamtape", "streamtape replay")
    group.addoption(
        "--streamtape-profile",
        action="append",
        default=None,
        metavar="PROFILE",
        help="replay profile for streamtape tests whose marker names none (repeatable; "
        f"'{ALL_ADVERSARIAL}' = every adversarial profile). Default: faithful.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "streamtape(cassette=PATH, profile=PROFILE|[PROFILE...], realtime=True, ...): "
        "the cassette and replay profile(s) for the streamtape_* fixtures",
    )
    for text in config.getoption("streamtape_profile") or ():
        try:
            expand_profiles([text])
        except StreamtapeError as e:
            raise pytest.UsageError(f"--streamtape-profile: {e}") from None


def pytest_report_header(config: pytest.Config) -> str | None:
    profiles = config.getoption("streamtape_profile")
    return f"streamtape profile: {', '.join(profiles)}" if profiles else None


def expand_profiles(texts: Sequence[str]) -> list[tuple[str, str]]:
    """``(id, profile text)`` for each profile, ``adversarial:*`` expanded; each one parsed
    (raises :class:`~streamtape.errors.ProfileError` for a bad one)."""
    from .profiles import ADVERSARIAL, parse_profile

    out: list[tuple[str, str]] = []
    for text in texts:
        if text.strip() == ALL_ADVERSARIAL:
            out.extend((f"adversarial:{name}", prof) for name, prof in ADVERSARIAL.items())
        else:
            parse_profile(text)
            out.append((text, text))
    return out


def _marker_kwargs(node: Any) -> dict[str, Any]:
    marker = node.get_closest_marker(MARKER)
    if marker is None:
        return {}
    kwargs = dict(marker.kwargs)
    if marker.args and "cassette" not in kwargs:
        kwargs["cassette"] = marker.args[0]
    return kwargs


def _profiles_for(node: Any, config: pytest.Config) -> list[tuple[str, str]]:
    marked = _marker_kwargs(node).get("profile")
    if marked is not None:
        texts = [marked] if isinstance(marked, str) else list(marked)
    else:
        texts = config.getoption("streamtape_profile") or ["faithful"]
    return expand_profiles(texts)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "streamtape_profile" not in metafunc.fixturenames:
        return
    try:
        profiles = _profiles_for(metafunc.definition, metafunc.config)
    except StreamtapeError as e:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: streamtape marker: {e}") from None
    if len(profiles) > 1:
        metafunc.parametrize(
            "streamtape_profile",
            [text for _, text in profiles],
            ids=[pid for pid, _ in profiles],
            indirect=True,
        )


def _resolve(raw: Any, base: Path) -> list[Path]:
    items = [raw] if isinstance(raw, str | Path) else list(raw)
    return [p if (p := Path(item)).is_absolute() else base / p for item in items]


@pytest.fixture
def streamtape_cassette(request: pytest.FixtureRequest) -> Cassette:
    """The cassette named by the ``streamtape`` marker, loaded."""
    raw = _marker_kwargs(request.node).get("cassette")
    if raw is None:
        pytest.fail(
            "streamtape fixtures need a cassette: @pytest.mark.streamtape(cassette='path.tape')",
            pytrace=False,
        )
    paths = _resolve(raw, request.path.parent)
    failure = None
    try:
        if len(paths) == 1 and not paths[0].is_dir():
            return load(paths[0])
        cassettes = load_many(paths)
    except StreamtapeError as e:
        failure = f"streamtape: {e}"
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    merged = Cassette([ix for c in cassettes for ix in c], path=paths[0])
    merged.warnings = [w for c in cassettes for w in c.warnings]
    return merged


@pytest.fixture
def streamtape_profile(request: pytest.FixtureRequest) -> str:
    """The profile this test runs under (parametrized when there are several)."""
    param = getattr(request, "param", None)
    if param is not None:
        return str(param)
    return _profiles_for(request.node, request.config)[0][1]


def _replay_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    kw = _marker_kwargs(request.node)
    return {k: kw[k] for k in _OPTIONS if k in kw}


def _realtime(request: pytest.FixtureRequest) -> bool:
    return bool(_marker_kwargs(request.node).get("realtime", True))


def _replayer(name: str, request: pytest.FixtureRequest, cassette: Cassette, profile: str) -> Any:
    """One of streamtape.transport's replayers with this test's marker options (imported late)."""
    from . import transport

    return getattr(transport, name)(cassette, profile, realtime=_realtime(request), **_replay_options(request))


@pytest.fixture
def streamtape_transport(
    request: pytest.FixtureRequest, streamtape_cassette: Cassette, streamtape_profile: str
) -> Any:
    """A sync ReplayTransport for ``httpx.Client`` / ``httpx2.Client(transport=...)``."""
    return _replayer("ReplayTransport", request, streamtape_cassette, streamtape_profile)


@pytest.fixture
def streamtape_async_transport(
    request: pytest.FixtureRequest, streamtape_cassette: Cassette, streamtape_profile: str
) -> Any:
    """An AsyncReplayTransport for ``httpx.AsyncClient`` / ``httpx2.AsyncClient(transport=...)``."""
    return _replayer("AsyncReplayTransport", request, streamtape_cassette, streamtape_profile)


@pytest.fixture
def streamtape_adapter(
    request: pytest.FixtureRequest, streamtape_cassette: Cassette, streamtape_profile: str
) -> Any:
    """A ReplayAdapter (a requests HTTPAdapter) to mount on a Session."""
    return _replayer("ReplayAdapter", request, streamtape_cassette, streamtape_profile)


@pytest.fixture
def streamtape_session(streamtape_adapter: Any) -> Iterator[Any]:
    """A requests.Session answering every http:// and https:// request from the cassette."""
    import requests

    with requests.Session() as session:
        session.mount("http://", streamtape_adapter)
        session.mount("https://", streamtape_adapter)
        yield session


@pytest.fixture
def streamtape_server(
    request: pytest.FixtureRequest, streamtape_cassette: Cassette, streamtape_profile: str
) -> Iterator[str]:
    """The base URL of a replay server on 127.0.0.1 (any free port), for this test only.

    Requests may carry ``X-Streamtape-Profile`` to change the profile per request.
    """
    from .serve import ReplayServer

    opts = _replay_options(request)
    server = ReplayServer(
        list(streamtape_cassette),
        profile=streamtape_profile,
        ignore_fields=opts.get("ignore_fields", ()),
        match_headers=opts.get("match_headers", ()),
        strict=opts.get("strict", False),
    )
    with server:
        yield server.url
