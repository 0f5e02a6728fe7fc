"""The pytest plugin, exercised by running pytest on generated test files (pytester)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys

import pytest

import streamtape
import tests.support.pytester_runs  # noqa: F401  (keeps httpcore and httpcore2 from being dropped by a run)
from tests.support.builders import CHAT_BODY, EVENTS, chat_ix

pytest_plugins = ["pytester"]

needs_httpx2 = pytest.mark.skipif(
    importlib.util.find_spec("httpx2") is None,
    reason="needs httpx2, left out of the test extra on Python 3.11 (mitmproxy 11 pins h11 < 0.15)",
)


def _plugin_args() -> list[str]:
    """``-p streamtape.pytest_plugin`` unless an installed entry point loads it already."""
    for ep in importlib.metadata.entry_points(group="pytest11"):
        if ep.value.startswith("streamtape"):
            return ["-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    return ["-p", "streamtape.pytest_plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A test project with ``cassettes/chat.tape`` (the chat stream of tests/support/builders.py, 5 ms a piece)."""
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


@needs_httpx2
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
    result.stdout.fnmatch_lines(["streamtape profile: adversarial:*", "*test_requests[[]utf8-split[]] PASSED*"])


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
        import httpx, pytest
        from helpers import EVENTS, BODY

        @pytest.mark.streamtape(cassette="cassettes/chat.tape", profile="instant;fault=cut-event:2")
        def test_cut(streamtape_server):
            assert streamtape_server.startswith("http://127.0.0.1:")
            with httpx.Client() as c, c.stream("POST", streamtape_server + "/v1/chat/completions", json=BODY) as r:
                got = []
                with pytest.raises(httpx.RemoteProtocolError):
                    for p in r.iter_raw():
                        got.append(p)
                assert b"".join(got) == b"".join(EVENTS[:2])
        """
    )
    run(project).assert_outcomes(passed=1)


def test_async_transport_fixture_works_with_asyncio_tests(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import httpx, pytest
        from helpers import EVENTS, URL, BODY

        @pytest.mark.asyncio
        @pytest.mark.streamtape(cassette="cassettes/chat.tape", profile="instant", realtime=False)
        async def test_async(streamtape_async_transport):
            async with httpx.AsyncClient(transport=streamtape_async_transport) as c:
                r = await c.post(URL, json=BODY)
            assert r.content == b"".join(EVENTS)
        """
    )
    run(project).assert_outcomes(passed=1)


def test_without_a_marker_the_default_cassette_is_named_when_missing(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_nomark="""
        def test_x(streamtape_transport):
            pass
        """
    )
    result = run(project)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["streamtape: cassettes/test_nomark/test_x.tape: no such cassette file*"])
    result.stdout.no_fnmatch_line("*Traceback*")


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
    result.stdout.fnmatch_lines(["streamtape: cassettes/nope.tape: no such cassette file (record_mode=none replays only*"])
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


# -- the streamtape fixture -------------------------------------------------------------


def _default_cassette(pytester: pytest.Pytester, module: str, test: str) -> None:
    path = pytester.path / "cassettes" / module / f"{test}.tape"
    path.parent.mkdir(parents=True, exist_ok=True)
    streamtape.save(path, [chat_ix(5)])


def test_the_default_cassette_is_named_for_the_module_and_the_test_and_shared_by_parameter_sets(
    project: pytest.Pytester,
) -> None:
    _default_cassette(project, "test_defaults", "test_plain")
    _default_cassette(project, "test_defaults", "TestGroup.test_method")
    project.makepyfile(
        test_defaults="""
        import pytest

        def test_plain(streamtape):
            assert streamtape.path.relative_to(streamtape.path.parents[2]).as_posix() == (
                "cassettes/test_defaults/test_plain.tape")
            assert len(streamtape.cassette) == 1

        class TestGroup:
            @pytest.mark.parametrize("n", [1, 2])
            def test_method(self, streamtape, n):
                assert streamtape.path.name == "TestGroup.test_method.tape"
                assert len(streamtape.cassette) == 1
        """
    )
    run(project).assert_outcomes(passed=3)


def test_the_ini_option_moves_the_cassette_folder_and_the_marker_still_wins(project: pytest.Pytester) -> None:
    project.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\nstreamtape_cassette_dir = recorded/tapes\n"
    )
    path = project.path / "recorded" / "tapes" / "test_ini" / "test_moved.tape"
    path.parent.mkdir(parents=True)
    streamtape.save(path, [chat_ix(5)])
    project.makepyfile(
        test_ini="""
        import pytest

        def test_moved(streamtape):
            assert streamtape.path.parts[-4:] == ("recorded", "tapes", "test_ini", "test_moved.tape")
            assert len(streamtape.cassette) == 1

        @pytest.mark.streamtape(cassette="cassettes/chat.tape")
        def test_marked(streamtape):
            assert streamtape.path.name == "chat.tape"
        """
    )
    run(project).assert_outcomes(passed=2)


def test_transports_and_server_of_one_test_share_the_requests_and_the_repeat_order(
    project: pytest.Pytester,
) -> None:
    two = [chat_ix(5, tag="first"), chat_ix(5, events=EVENTS[:2], tag="second")]
    streamtape.save(project.path / "cassettes" / "two.tape", two)
    project.makepyfile(
        """
        import httpx, pytest
        from helpers import EVENTS, URL, BODY

        @pytest.mark.streamtape(cassette="cassettes/two.tape", profile="instant")
        def test_both(streamtape):
            assert streamtape.requests == []
            with streamtape.client() as c:
                assert c.post("/v1/chat/completions", json=BODY).content == b"".join(EVENTS)
            with httpx.Client() as c:
                assert c.post(streamtape.url + "/v1/chat/completions", json=BODY).content == b"".join(EVENTS[:2])
            sent = streamtape.requests
            assert [(r.method, r.path, r.answer, r.interaction) for r in sent] == [
                ("POST", "/v1/chat/completions", "replayed", 0),
                ("POST", "/v1/chat/completions", "replayed", 1),
            ]
            assert sent[0].json() == BODY
            streamtape.assert_all_played()
        """
    )
    run(project).assert_outcomes(passed=1)


def test_assert_all_played_names_the_interactions_nobody_requested(project: pytest.Pytester) -> None:
    other = chat_ix(5, body={"model": "test-model", "stream": True, "messages": []})
    streamtape.save(project.path / "cassettes" / "two.tape", [chat_ix(5), other])
    project.makepyfile(
        """
        import pytest
        from helpers import BODY

        @pytest.mark.streamtape(cassette="cassettes/two.tape", profile="instant")
        def test_one_of_two(streamtape):
            with streamtape.client() as c:
                c.post("/v1/chat/completions", json=BODY)
            streamtape.assert_all_played()
        """
    )
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["streamtape: cassettes/two.tape: 1 recorded interaction never requested: #1 POST /v1/chat/completions"]
    )


def test_an_unmatched_request_fails_the_test_even_when_the_code_swallows_the_error(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest

        @pytest.mark.streamtape(cassette="cassettes/chat.tape", profile="instant")
        def test_swallowed(streamtape):
            with streamtape.client() as c:
                r = c.post("/v1/chat/completions", json={"model": "other-model", "stream": True, "messages": []})
            assert r.status_code == 422  # the code under test shrugs it off
        """
    )
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "streamtape: cassettes/chat.tape: no recorded interaction matches POST /v1/chat/completions; "
            "closest is #0 POST /v1/chat/completions: body *"
        ]
    )


def test_a_profile_set_runs_once_per_member_with_readable_ids(project: pytest.Pytester) -> None:
    from streamtape.profiles import ADVERSARIAL

    project.makepyfile(
        """
        import pytest
        from helpers import EVENTS, BODY

        @pytest.mark.streamtape(cassette="cassettes/chat.tape", profiles="adversarial")
        def test_chat(streamtape):
            with streamtape.client() as c:
                body = c.post("/v1/chat/completions", json=BODY).content
            data = [e + b"\\n\\n" for e in body.split(b"\\n\\n") if e.startswith(b"data:")]
            assert data == EVENTS
        """
    )
    result = run(project, "-v")
    result.assert_outcomes(passed=len(ADVERSARIAL))
    result.stdout.fnmatch_lines(["*::test_chat[[]bytes-1[]] PASSED*", "*::test_chat[[]utf8-split[]] PASSED*"])


NAIVE_CLIENT = '''
import json, pytest
from helpers import BODY

@pytest.mark.streamtape(cassette="cassettes/chat.tape", profiles="adversarial")
def test_naive(streamtape):
    """A client that takes every piece it reads for whole events (a common bug)."""
    text = ""
    with streamtape.client() as c, c.stream("POST", "/v1/chat/completions", json=BODY) as r:
        for piece in r.iter_raw():
            for block in piece.decode("utf-8").split("\\n\\n"):
                if block.startswith("data: {"):
                    text += json.loads(block[6:])["choices"][0]["delta"].get("content") or ""
    assert text == "Hello, wörld!"

@pytest.mark.streamtape(cassette="cassettes/chat.tape", profiles=["instant", "adversarial:events"])
def test_sturdy(streamtape):
    with streamtape.client() as c:
        assert c.post("/v1/chat/completions", json=BODY).status_code == 200
'''


def test_the_terminal_summary_lists_per_test_the_profiles_it_failed_under(project: pytest.Pytester) -> None:
    from streamtape.profiles import ADVERSARIAL

    project.makepyfile(test_conformance=NAIVE_CLIENT)
    result = run(project, "-rf")
    failed = sorted(
        line.split("[", 1)[1].split("]", 1)[0]
        for line in result.stdout.lines
        if line.startswith("FAILED test_conformance.py::test_naive[")
    )
    assert "bytes-1" in failed and "events" not in failed  # the matrix does tell the profiles apart
    result.assert_outcomes(failed=len(failed), passed=len(ADVERSARIAL) - len(failed) + 2)
    in_order = [name for name in ADVERSARIAL if name in failed]
    result.stdout.fnmatch_lines(
        [
            "*streamtape profile matrix*",
            f"test_conformance.py::test_naive    9 profiles  FAILED under {len(failed)}: {', '.join(in_order)}",
            "test_conformance.py::test_sturdy   2 profiles  passed under all",
            "1 of 2 tests failed under some profile",
        ]
    )


def test_no_matrix_no_summary(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest

        @pytest.mark.streamtape(cassette="cassettes/chat.tape")
        def test_one(streamtape):
            pass
        """
    )
    result = run(project)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*streamtape profile matrix*")


# -- misuse -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('profile="chunk=nope"', "profile 'chunk=nope': bad item 'chunk=nope': unknown chunking 'nope'*"),
        ('profiles="hostile"', "profiles='hostile': unknown profile set (sets: adversarial;*"),
        ('record_mode="sometimes"', "record_mode: unknown record mode 'sometimes' (expected one of none, once, new_episodes, all)"),
        ('record_mode="new_episodes"', "record_mode=new_episodes (marker) needs the real backend to record *"),
        ('record_mod="once"', "streamtape marker: unknown argument 'record_mod' (known: cassette, *"),
        ('upstream="ftp://x"', "upstream 'ftp://x': expected an http:// or https:// URL (or HOST:PORT)"),
        ('upstream="http://127.0.0.1:8080/v1"', "upstream 'http://127.0.0.1:8080/v1': takes no path; give scheme://host[[]:port[]]*"),
    ],
)
def test_misuse_is_one_collection_error_naming_the_bad_value(
    project: pytest.Pytester, marker: str, message: str
) -> None:
    project.makepyfile(
        test_misuse=f"""
        import pytest

        @pytest.mark.streamtape({marker})
        def test_x(streamtape):
            pass
        """
    )
    result = run(project)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ERROR collecting test_misuse.py*", f"test_misuse.py::test_x: streamtape: {message}"])
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*raise *")


def test_a_matrix_test_under_none_with_no_cassette_fails_alone_and_its_module_still_runs(
    project: pytest.Pytester,
) -> None:
    """A matrix records (tests/system/test_pytest_matrix_record.py) unless its mode never does:
    then each case fails naming the missing file, as any test does, and collection is untouched."""
    project.makepyfile(
        test_module_matrix="""
        import pytest

        @pytest.mark.streamtape(profiles="adversarial", upstream="http://127.0.0.1:9")
        def test_matrix(streamtape):
            streamtape.cassette

        def test_other():
            pass
        """
    )
    result = run(project, "--streamtape-record-mode", "none")
    result.assert_outcomes(passed=1, failed=9)
    result.stdout.no_fnmatch_line("*ERROR collecting*")
    result.stdout.fnmatch_lines(["*streamtape: cassettes/test_module_matrix/test_matrix.tape: no such cassette file *"])
    result.stdout.no_fnmatch_line("*Traceback*")
    run(project, "-k", "other", "--streamtape-record-mode", "once").assert_outcomes(passed=1, deselected=9)


def test_a_bad_record_mode_on_the_command_line_or_in_the_environment_is_a_usage_error(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile("def test_x(): pass")
    result = run(project, "--streamtape-record-mode", "sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--streamtape-record-mode: invalid choice: 'sometimes'*"])
    monkeypatch.setenv("STREAMTAPE_RECORD_MODE", "sometimes")
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: STREAMTAPE_RECORD_MODE: unknown record mode 'sometimes'*"])


def test_the_environment_chooses_the_record_mode_and_the_command_line_beats_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(
        test_env="""
        import pytest

        @pytest.mark.streamtape(cassette="cassettes/chat.tape")
        def test_mode(streamtape, request):
            assert streamtape.record_mode == request.config.getoption("expected")
        """,
        conftest="""
        def pytest_addoption(parser):
            parser.addoption("--expected")
        """,
    )
    monkeypatch.setenv("STREAMTAPE_RECORD_MODE", "once")
    run(project, "--expected", "once").assert_outcomes(passed=1)
    run(project, "--expected", "none", "--streamtape-record-mode", "none").assert_outcomes(passed=1)
