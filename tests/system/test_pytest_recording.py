"""The pytest plugin's record modes, end to end: pytest runs generated test modules
(pytester) that use the real openai SDK against a real upstream on 127.0.0.1,
record through the in-process recorder (real mitmproxy), then replay offline."""

from __future__ import annotations

import importlib.util
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import streamtape
from tests.support.builders import CHAT_BODY, chat_events, chat_ix
from tests.support.pytester_runs import (  # imports mitmproxy once, before any run
    asyncio_project,
    run,
)
from tests.support.servers import Conn, Received, ScriptedServer, sse_events

pytest_plugins = ["pytester"]

needs_openai = pytest.mark.skipif(
    importlib.util.find_spec("openai") is None,
    reason="the openai SDK needs httpx2, left out of the test extra on Python 3.11",
)

KEY = "sk-test-key-that-must-never-reach-a-cassette-4242"

CHAT_MODULE = f'''
import openai, pytest

KEY = {KEY!r}

def ask(client, prompt):
    stream = client.chat.completions.create(
        model="test-model", messages=[{{"role": "user", "content": prompt}}], stream=True)
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

def test_over_the_url(streamtape):
    client = openai.OpenAI(api_key=KEY, base_url=streamtape.url + "/v1", max_retries=0)
    assert ask(client, "hi") == "Echo: hi ☃"

def test_in_process(streamtape):
    client = openai.OpenAI(api_key=KEY, base_url="http://llm.test/v1",
                           http_client=streamtape.client(), max_retries=0)
    assert ask(client, "hello") == "Echo: hello ☃"
'''


def reply_words(prompt: str) -> list[str]:
    """What the upstream answers to ``prompt``, word by word (a snowman to split in UTF-8)."""
    return ["Echo", ": ", prompt, " ☃"]


def echo(req: Received, conn: Conn) -> None:
    prompt = json.loads(req.body)["messages"][-1]["content"]
    sse_events(chat_events(reply_words(prompt)), gap=0.005)(req, conn)


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    """A real OpenAI-shaped streaming backend on 127.0.0.1 that echoes the prompt."""
    with ScriptedServer({"/v1/chat/completions": echo}) as server:
        yield server


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return asyncio_project(pytester)


def cassette_of(pytester: pytest.Pytester, module: str, test: str) -> Path:
    return pytester.path / "cassettes" / module / f"{test}.tape"


def prompts(cassette: streamtape.Cassette) -> list[str]:
    return [json.loads(ix.request.body)["messages"][-1]["content"] for ix in cassette]


# -- once: record, then replay offline -------------------------------------------------


@needs_openai
def test_once_records_then_the_same_module_replays_offline_under_every_profile(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    from streamtape.profiles import ADVERSARIAL

    project.makepyfile(test_chat=CHAT_MODULE)
    recorded = run(project, "--streamtape-record-mode=once", "--streamtape-upstream", upstream.url)
    recorded.assert_outcomes(passed=2)
    assert len(upstream.received) == 2
    recorded.stdout.fnmatch_lines(
        ["*streamtape cassettes*", "cassettes/test_chat/test_over_the_url.tape: created with 1 interaction from http*"]
    )
    for test, prompt in (("test_over_the_url", "hi"), ("test_in_process", "hello")):
        path = cassette_of(project, "test_chat", test)
        cas = streamtape.load(path)
        assert prompts(cas) == [prompt]
        assert cas[0].request.header("authorization") == "REDACTED"
        assert KEY.encode() not in path.read_bytes()
        assert cas[0].labels == {"test": f"test_chat.py::{test}"}
    assert not list((project.path / "cassettes" / "test_chat").glob(".*"))  # no recording or lock file left

    upstream.__exit__()  # from here on the backend is gone
    offline = run(project)
    offline.assert_outcomes(passed=2)
    matrix = run(project, "--streamtape-profile", "adversarial:*", "-v")
    matrix.assert_outcomes(passed=2 * len(ADVERSARIAL))
    assert len(upstream.received) == 2
    matrix.stdout.fnmatch_lines(["*test_over_the_url[[]utf8-split[]] PASSED*"])
    again = run(project, "--streamtape-record-mode=once", "--streamtape-upstream", upstream.url)
    again.assert_outcomes(passed=2)  # once: the cassettes exist, so it replays
    assert len(upstream.received) == 2


@needs_openai
def test_an_unmatched_request_fails_naming_the_cassette_the_request_and_the_closest_recording(
    project: pytest.Pytester,
) -> None:
    path = cassette_of(project, "test_chat", "test_over_the_url")
    path.parent.mkdir(parents=True)
    streamtape.save(path, [chat_ix(body={"model": "test-model", "stream": True,
                                         "messages": [{"role": "user", "content": "bye"}]})])
    project.makepyfile(test_chat=CHAT_MODULE)
    result = run(project, "-k", "over_the_url")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "streamtape: cassettes/test_chat/test_over_the_url.tape: no recorded interaction matches "
            "POST /v1/chat/completions; closest is test_over_the_url.tape#0 POST /v1/chat/completions: "
            'body messages[[]0[]].content is "hi", recorded "bye"',
            "(the test then failed: UnprocessableEntityError: *",
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")


@needs_openai
def test_a_missing_cassette_fails_the_test_naming_the_file_and_how_to_record_it(project: pytest.Pytester) -> None:
    project.makepyfile(test_chat=CHAT_MODULE)
    result = run(project, "-k", "in_process")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*streamtape: cassettes/test_chat/test_in_process.tape: no such cassette file "
            "(record_mode=none replays only*--streamtape-record-mode=once*--streamtape-upstream URL*"
        ]
    )


# -- new_episodes and all ----------------------------------------------------------------

TWO_PROMPTS = '''
import openai

def test_two(streamtape):
    client = openai.OpenAI(api_key="sk-x", base_url=streamtape.url + "/v1", max_retries=0)
    for prompt in ("hi", "new"):
        stream = client.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": prompt}], stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text.startswith("Echo: " + prompt) or (prompt == "hi" and text == "Hello, wörld!")
    sent = [(r.answer.value, r.json()["messages"][0]["content"]) for r in streamtape.requests]
    print("SENT", sent)
'''


def _hi_cassette(project: pytest.Pytester, module: str, test: str) -> Path:
    """A cassette holding one recording of the "hi" prompt (answered "Hello, wörld!")."""
    path = cassette_of(project, module, test)
    path.parent.mkdir(parents=True, exist_ok=True)
    streamtape.save(path, [chat_ix()])
    return path


@needs_openai
def test_new_episodes_replays_what_matches_and_appends_only_the_new_interaction(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    path = _hi_cassette(project, "test_two", "test_two")
    before = path.read_bytes()
    project.makepyfile(test_two=TWO_PROMPTS)
    result = run(project, "-s", "--streamtape-record-mode=new_episodes", "--streamtape-upstream", upstream.url)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*SENT [[]('replayed', 'hi'), ('recorded', 'new')[]]"])
    assert [json.loads(r.body)["messages"][0]["content"] for r in upstream.received] == ["new"]
    after = path.read_bytes()
    assert after.startswith(before)  # appended: the old recording is untouched
    cas = streamtape.load(path)
    assert prompts(cas) == ["hi", "new"]
    assert cas[0] == chat_ix()
    assert cas[1].response is not None
    assert b"".join(p.data for p in cas[1].response.pieces) == b"".join(chat_events(reply_words("new")))
    result.stdout.fnmatch_lines(["cassettes/test_two/test_two.tape: appended with 1 interaction from http*"])

    upstream.__exit__()
    run(project).assert_outcomes(passed=1)  # and now both replay offline
    assert len(upstream.received) == 1


@needs_openai
def test_all_records_everything_again_and_replaces_the_cassette(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    path = _hi_cassette(project, "test_two", "test_two")
    project.makepyfile(test_two=TWO_PROMPTS)
    result = run(project, "-s", "--streamtape-record-mode=all", "--streamtape-upstream", upstream.url)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*SENT [[]('recorded', 'hi'), ('recorded', 'new')[]]"])
    assert len(upstream.received) == 2
    cas = streamtape.load(path)
    assert prompts(cas) == ["hi", "new"]
    assert cas[0].response is not None
    assert b"".join(p.data for p in cas[0].response.pieces) == b"".join(chat_events(reply_words("hi")))
    result.stdout.fnmatch_lines(["cassettes/test_two/test_two.tape: replaced with 2 interactions from http*"])


def test_a_failing_test_leaves_the_cassette_as_it_was_and_its_recording_beside_it(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    path = _hi_cassette(project, "test_fails", "test_fails")
    before = path.read_bytes()
    project.makepyfile(
        test_fails='''
        import httpx

        def test_fails(streamtape):
            with httpx.Client(base_url=streamtape.url) as c:
                r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
            assert r.text == "something else"
        '''
    )
    result = run(project, "--streamtape-record-mode=all", "--streamtape-upstream", upstream.url)
    result.assert_outcomes(failed=1)
    assert path.read_bytes() == before
    failed = path.with_name(path.name + ".failed")
    assert prompts(streamtape.load(failed)) == ["x"]
    result.stdout.fnmatch_lines(
        ["cassettes/test_fails/test_fails.tape unchanged: the test failed; its recording (1 interaction) "
         "is in cassettes/test_fails/test_fails.tape.failed"]
    )


def refused_url() -> str:
    """The URL of a port on 127.0.0.1 where nothing listens (a connection is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_recording_with_the_upstream_down_fails_naming_the_upstream(project: pytest.Pytester) -> None:
    url = refused_url()
    project.makepyfile(
        test_down='''
        import json, pathlib
        import httpx

        def test_down(streamtape):
            with httpx.Client(base_url=streamtape.url) as c:
                r = c.post("/v1/chat/completions", json={"prompt": "x"})
            seen = {"status": r.status_code, "type": r.headers["content-type"], "body": r.text}
            pathlib.Path("seen.json").write_text(json.dumps(seen))
        '''
    )
    result = run(project, "--streamtape-record-mode=once", "--streamtape-upstream", url)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"streamtape: POST /v1/chat/completions: the upstream {url} did not answer*"])
    assert not cassette_of(project, "test_down", "test_down").exists()
    # What the test's client got: the recorder's JSON 502, not mitmproxy's HTML page.
    seen = json.loads((project.path / "seen.json").read_text())
    assert (seen["status"], seen["type"]) == (502, "application/json")
    message = json.loads(seen["body"])["error"]["message"]
    assert message.startswith(f"streamtape's recording proxy could not reach the upstream {url}: connection refused (")


def test_the_marker_chooses_record_mode_and_upstream(project: pytest.Pytester, upstream: ScriptedServer) -> None:
    project.makepyfile(
        test_marked=f'''
        import pytest

        @pytest.mark.streamtape(record_mode="once", upstream={upstream.url!r})
        def test_marked(streamtape):
            assert streamtape.action == "record"
            with streamtape.client() as c:
                r = c.post("/v1/chat/completions", json={{"messages": [{{"role": "user", "content": "m"}}]}})
            assert '"content":"m"' in r.text
        '''
    )
    run(project, "--streamtape-record-mode=none").assert_outcomes(passed=1)  # the marker wins
    assert prompts(streamtape.load(cassette_of(project, "test_marked", "test_marked"))) == ["m"]


# -- async tests -----------------------------------------------------------------------------


@needs_openai
def test_an_anyio_test_records_and_replays_with_the_async_client(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    project.makepyfile(
        test_anyio='''
        import openai, pytest

        @pytest.mark.anyio
        async def test_async(streamtape):
            async with streamtape.async_client() as http:
                client = openai.AsyncOpenAI(api_key="sk-x", base_url="http://llm.test/v1",
                                            http_client=http, max_retries=0)
                stream = await client.chat.completions.create(
                    model="test-model", messages=[{"role": "user", "content": "async"}], stream=True)
                text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            assert text == "Echo: async ☃"
            assert [r.path for r in streamtape.requests] == ["/v1/chat/completions"]
        '''
    )
    run(project, "--streamtape-record-mode=once", "--streamtape-upstream", upstream.url).assert_outcomes(passed=1)
    assert len(upstream.received) == 1
    upstream.__exit__()
    run(project, "--streamtape-profile", "adversarial:bytes-1").assert_outcomes(passed=1)
    assert len(upstream.received) == 1


@needs_openai
def test_an_asyncio_test_replays_through_the_url(project: pytest.Pytester) -> None:
    _hi_cassette(project, "test_aio", "test_aio")
    project.makepyfile(
        test_aio='''
        import openai, pytest

        @pytest.mark.asyncio
        async def test_aio(streamtape):
            client = openai.AsyncOpenAI(api_key="sk-x", base_url=streamtape.url + "/v1", max_retries=0)
            stream = await client.chat.completions.create(
                model="test-model", messages=[{"role": "user", "content": "hi"}], stream=True)
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            assert text == "Hello, wörld!"
            await client.close()
        '''
    )
    run(project).assert_outcomes(passed=1)


# -- pytest-xdist -----------------------------------------------------------------------------

PARAMS_MODULE = '''
import pytest

@pytest.mark.parametrize("n", range(6))
def test_param(streamtape, n):
    with streamtape.client() as c:
        r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": f"p{n}"}]})
    assert f'"content":"p{n}"' in r.text
'''


def test_two_xdist_workers_record_parameter_sets_into_one_cassette_and_replay_it(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    pytest.importorskip("xdist")
    project.makepyfile(test_params=PARAMS_MODULE)
    recorded = run(project, "-n", "2", "--streamtape-record-mode=once", "--streamtape-upstream", upstream.url)
    recorded.assert_outcomes(passed=6)
    path = cassette_of(project, "test_params", "test_param")
    cas = streamtape.load(path)
    assert cas.warnings == []
    assert sorted(prompts(cas)) == [f"p{n}" for n in range(6)]
    assert len(upstream.received) == 6
    assert sorted({ix.labels["test"] for ix in cas}) == sorted(f"test_params.py::test_param[{n}]" for n in range(6))

    upstream.__exit__()
    replayed = run(project, "-n", "2")
    replayed.assert_outcomes(passed=6)
    assert len(streamtape.load(path)) == 6
    assert len(upstream.received) == 6


def test_each_xdist_worker_runs_its_own_replay_servers(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    path = cassette_of(project, "test_ports", "test_port")
    path.parent.mkdir(parents=True)
    streamtape.save(path, [chat_ix()])
    project.makepyfile(
        test_ports='''
        import os, pytest, httpx

        @pytest.mark.parametrize("n", range(4))
        def test_port(streamtape, n):
            from helpers_chat import BODY
            with httpx.Client() as c:
                r = c.post(streamtape.url + "/v1/chat/completions", json=BODY)
            assert r.status_code == 200
            with open(f"seen-{os.environ['PYTEST_XDIST_WORKER']}-{n}", "w") as f:
                f.write(streamtape.url)
        ''',
        helpers_chat=f"BODY = {CHAT_BODY!r}",
    )
    run(project, "-n", "2").assert_outcomes(passed=4)
    seen = {f.name: f.read_text() for f in project.path.glob("seen-*")}
    workers = {re.match(r"seen-(gw\d)-", name).group(1) for name in seen}  # type: ignore[union-attr]
    assert workers == {"gw0", "gw1"}
    assert len(set(seen.values())) == 4  # one server per test, each on its own port
