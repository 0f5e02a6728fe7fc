"""A request no recording answers, as the real SDKs report it: the chosen status (422 by
default, not the 404 they read as a missing model), asked once, and the explanation in
the message they show, in the error shape of the request's API."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import ollama
import pytest

import streamtape
from streamtape.serve import ReplayServer
from tests.support.builders import CHAT_BODY, chat_ix, interaction, ndjson, sse
from tests.support.processes import STREAMTAPE, start

NEEDS_HTTPX2 = "needs httpx2 and the openai SDK, left out of the test extra on Python 3.11 (mitmproxy 11 pins h11 < 0.15)"
pytest.importorskip("httpx2", reason=NEEDS_HTTPX2)
pytest.importorskip("openai", reason=NEEDS_HTTPX2)
import httpx2  # noqa: E402  (after the skip: absent on Python 3.11)
import openai  # noqa: E402

EXPLAINED = "no recorded interaction matches POST /v1/chat/completions; closest is #0 POST /v1/chat/completions"
MESSAGES = [{"role": "user", "content": "hi"}]

ANTHROPIC_BODY = {"model": "claude-test", "max_tokens": 16, "messages": MESSAGES}
OLLAMA_BODY = {"model": "llama-test", "messages": MESSAGES, "stream": False}


def anthropic_ix() -> streamtape.Interaction:
    return interaction([sse({"type": "message_start"}, "message_start")],
                       url="https://api.anthropic.com/v1/messages", body=ANTHROPIC_BODY)


def ollama_ix() -> streamtape.Interaction:
    return interaction([ndjson({"model": "llama-test", "done": True})], content_type="application/x-ndjson",
                       url="http://127.0.0.1:11434/api/chat", body=OLLAMA_BODY)


@pytest.fixture
def lines() -> list[str]:
    return []


@pytest.fixture
def served(lines: list[str]) -> Iterator[ReplayServer]:
    with ReplayServer([chat_ix(1), anthropic_ix(), ollama_ix()], profile="instant", log=lines.append) as srv:
        yield srv


def openai_client(base: str, **options: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key="sk-test", **options)  # type: ignore[arg-type]


@pytest.mark.httpx2
def test_the_openai_sdk_reports_a_no_match_as_a_422_whose_message_says_why(
    served: ReplayServer, lines: list[str]
) -> None:
    client = openai_client(served.url, max_retries=2)
    with pytest.raises(openai.APIStatusError) as e:
        client.chat.completions.create(model="other-model", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    assert type(e.value) is openai.UnprocessableEntityError  # not NotFoundError: no model is missing
    assert e.value.status_code == 422
    assert str(e.value).startswith(f"Error code: 422 - {EXPLAINED}: body model is \"other-model\"")
    assert e.value.type == "streamtape_no_match"
    assert len(served.received) == 1  # asked once: a 4xx is not retried
    assert "422 outcome=no_match: " + EXPLAINED in lines[-1]


@pytest.mark.httpx2
def test_a_5xx_chosen_for_the_no_match_is_still_asked_once_by_the_openai_sdk() -> None:
    with ReplayServer([chat_ix(1)], profile="instant", no_match_status=501) as srv:
        client = openai_client(srv.url, max_retries=2)
        with pytest.raises(openai.InternalServerError) as e:
            client.chat.completions.create(model="other-model", messages=MESSAGES)  # type: ignore[arg-type]
        assert e.value.status_code == 501 and EXPLAINED in str(e.value)
        assert e.value.response.headers["x-should-retry"] == "false"
        assert len(srv.received) == 1  # the SDK retries a 5xx unless told not to


@pytest.mark.httpx2
def test_the_anthropic_sdk_gets_the_explanation_in_anthropics_error_shape(served: ReplayServer) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=served.url, api_key="sk-ant-test", max_retries=2)
    with pytest.raises(anthropic.APIStatusError) as e:
        client.messages.create(model="claude-other", max_tokens=16, messages=MESSAGES)  # type: ignore[arg-type]
    assert type(e.value) is anthropic.UnprocessableEntityError
    assert e.value.status_code == 422
    body = e.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "streamtape_no_match"
    message = body["error"]["message"]
    assert message.startswith("no recorded interaction matches POST /v1/messages; closest is #1 POST /v1/messages: "
                              'body model is "claude-other", recorded "claude-test"')
    assert message in str(e.value)
    assert len(served.received) == 1


def test_the_ollama_client_gets_the_explanation_as_its_error(served: ReplayServer) -> None:
    client = ollama.Client(host=served.url)
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="llama-other", messages=MESSAGES, stream=False)
    assert e.value.status_code == 422
    assert isinstance(e.value.error, str)
    assert e.value.error.startswith("no recorded interaction matches POST /api/chat; closest is #2 POST /api/chat: "
                                    'body model is "llama-other", recorded "llama-test"')
    assert str(e.value) == f"{e.value.error} (status code: 422)"


@pytest.mark.httpx2
def test_the_openai_sdk_on_the_in_process_transport_gets_the_same_answer() -> None:
    transport = streamtape.ReplayTransport([chat_ix(1)], "instant")
    client = openai.OpenAI(base_url="http://replay.test/v1", api_key="sk-test",
                           http_client=httpx2.Client(transport=transport))
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.chat.completions.create(model="other-model", messages=MESSAGES)  # type: ignore[arg-type]
    assert e.value.status_code == 422 and EXPLAINED in str(e.value)
    assert len(transport.received) == 1


@pytest.mark.httpx2
def test_serve_no_match_status_names_the_closest_cassette_of_several(tmp_path: Path) -> None:
    streamtape.save(tmp_path / "a.tape", [chat_ix(1, body={**CHAT_BODY, "max_tokens": 12})])
    streamtape.save(tmp_path / "b.tape", [chat_ix(1, body={**CHAT_BODY, "model": "b"}),
                                          chat_ix(1, body={**CHAT_BODY, "max_tokens": 200})])
    with start([*STREAMTAPE, "serve", str(tmp_path / "a.tape"), str(tmp_path / "b.tape"),
                "--port", "0", "--no-match-status", "501"], r" on (http://\S+:\d+) ") as proc:
        with pytest.raises(openai.InternalServerError) as e:
            openai_client(proc.url, max_retries=2).chat.completions.create(
                model="test-model", messages=MESSAGES, stream=True, max_tokens=200, seed=8)  # type: ignore[arg-type]
        proc.stop(signal.SIGINT)
    assert e.value.status_code == 501
    explained = ("no recorded interaction matches POST /v1/chat/completions; closest is b.tape#1 POST "
                 "/v1/chat/completions: body has seed=8, not in the recording")
    assert str(e.value) == f"Error code: 501 - {explained}"
    logged = [line.rstrip("\n") for line in proc.out_lines if "outcome=no_match" in line]
    assert logged == [f"#1 POST /v1/chat/completions 501 outcome=no_match: {explained}"]
