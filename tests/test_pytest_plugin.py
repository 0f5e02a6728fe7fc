"""The pytest plugin, exercised by running pytest on generated test files (pytester)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

import streamtape
from tests.builders import CHAT_BODY, EVENTS, chat_ix

pytest_plugins = ["pytester"]


def _plugin_args() -> list[str]:
    """``-p streamtape.pytest_plugin`` unless an installed entry point loads it already."""
    for ep in importlib.metadata.entry_points(group="pytest11"):
        if ep.value.startswith("streamtape"):
            return ["-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    return ["-p", "streamtape.pytest_plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A test project with ``cassettes/chat.tape`` (the chat stream of tests/builders.py, 5 ms a piece)."""
    (pytester.path / "cassettes").mkdir()
    streamtape.save(pytester.path / "cassettes" / "chat.tape", [chat_ix(5)])
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        helpers=f"""
        EVENTS = {EVENTS!r}
        URL = "http://llm.test/v1/chat/completions"
        BODY = {CHAT_BODY!r}
        """
    )
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*_plugin_args(), *args)


def test_transport_fixture_replays_the_marked_cassette_with_httpx2(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import httpx2, pytest
        from helpers import EVENTS, URL, BODY

        @pytest.mark.streamtape(cassette="cassettes/chat.tape", profile="instant")
        def test_chat(streamtape_transport, streamtape_profile, streamtape_cassette):
            assert streamtape_profile == "instant"
            assert len(streamtape_cassette) == 1
            with httpx2.Client(transport=streamtape_transport) as c, c.stream("POST", URL, json=BODY) as r:
                assert list(r.iter_raw()) == EVENTS
        """
    )
    run(project).assert_outcomes(passed=1)


def test_a_list_of_profiles_runs_the_test_once_per_profile(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import httpx, pytest
        from helpers import EVENTS, URL, BODY

        @pytest.mark.streamtape(cassette="cassettes/chat.tape",
                                profile=["instant", "chunk=bytes:2;latency=instant"])
        def test_chat(streamtape_transport):
            with httpx.Client(transport=streamtape_transport) as c:
                assert c.post(URL, json=BODY).content == b"".join(EVENTS)
        """
    )
    result = run(project, "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_chat?instant?*PASSED*", "*test_chat?chunk=bytes:2;latency=instant?*PASSED*"])


def test_command_line_adversarial_runs_every_adversarial_profile(project: pytest.Pytester) -> None:
    from streamtape.profiles import ADVERSARIAL

    project.makepyfile(
        r"""
        import pytest
        from helpers import EVENTS, URL, BODY

        pytestmark = pytest.mark.streamtape(cassette="cassettes/chat.tape")

        def test_requests(streamtape_session):
            r = streamtape_session.post(URL, json=BODY, stream=True)
            body = b"".join(r.iter_content(chunk_size=None))
            data = [e + b"\n\n" for e in body.split(b"\n\n") if e.startswith(b"data:")]
            assert data == EVENTS  # keep-alive comments aside, the same events
        """
    )
    result = run(project, "-v", "--streamtape-profile", "adversarial:*")
    result.assert_outcomes(passed=len(ADVERSARIAL))
    result.stdout.fnmatch_lines(["streamtape profile: adversarial:*", "*test_requests?adversarial:utf8-split?*PASSED*"])


def test_marker_profile_wins_over_the_command_line(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest

        @pytest.mark.streamtape(cassette="cassettes/chat.tape", profile="instant")
        def test_p(streamtape_profile):
            assert streamtape_profile == "instant"

        @pytest.mark.streamtape(cassette="cassettes/chat.tape")
        def test_q(streamtape_profile):
            assert streamtape_profile == "chunk=whole;latency=instant"
        """
    )
    run(project, "--streamtape-profile", "chunk=whole;latency=instant").assert_outcomes(passed=2)


def test_server_fixture_serves_the_cassette_over_http(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import httpx2, pytest
        from helpers import EVENTS, BODY

        @pytest.mark.streamtape(cassette="cassettes/chat.tape", profile="instant;fault=cut-event:2")
        def test_cut(streamtape_server):
            assert streamtape_server.startswith("http://127.0.0.1:")
            with httpx2.Client() as c, c.stream("POST", streamtape_server + "/v1/chat/completions", json=BODY) as r:
                got = []
                with pytest.raises(httpx2.RemoteProtocolError):
                    for p in r.iter_raw():
                        got.append(p)
                assert b"".join(got) == b"".join(EVENTS[:2])
        """
    )
    run(project).assert_outcomes(passed=1)


def test_async_transport_fixture_works_with_asyncio_tests(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import httpx2, pytest
        from helpers import EVENTS, URL, BODY

        @pytest.mark.asyncio
        @pytest.mark.streamtape(cassette="cassettes/chat.tape", profile="instant", realtime=False)
        async def test_async(streamtape_async_transport):
            async with httpx2.AsyncClient(transport=streamtape_async_transport) as c:
                r = await c.post(URL, json=BODY)
            assert r.content == b"".join(EVENTS)
        """
    )
    run(project).assert_outcomes(passed=1)


def test_missing_cassette_marker_fails_with_a_clear_message(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        def test_x(streamtape_transport):
            pass
        """
    )
    result = run(project)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*streamtape fixtures need a cassette*"])


def test_a_missing_cassette_file_names_the_file(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest

        @pytest.mark.streamtape(cassette="cassettes/nope.tape")
        def test_x(streamtape_cassette):
            pass
        """
    )
    result = run(project)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*streamtape: *nope.tape: no such cassette file"])
    result.stdout.no_fnmatch_line("*During handling*")


def test_a_bad_command_line_profile_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makepyfile("def test_x(): pass")
    result = run(project, "--streamtape-profile", "chunk=nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--streamtape-profile:*chunk=nope*"])


def test_importing_the_plugin_imports_no_http_client() -> None:
    code = (
        "import sys, streamtape.pytest_plugin; "
        "print(sorted(m for m in ('httpx', 'httpx2', 'requests', 'urllib3', 'mitmproxy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
