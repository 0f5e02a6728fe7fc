"""What a request no recording answers gets: its status, and the explanation in the error
shape of the API its path belongs to (in-process: :class:`ReplayTransport`)."""

from __future__ import annotations

import json

import httpx
import pytest

import streamtape
from streamtape.errors import OptionError
from streamtape.serve import ReplayServer
from streamtape.wire import NO_MATCH_STATUS, ErrorType, error_api, error_body
from tests.support.builders import CHAT_BODY, chat_ix


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/v1/chat/completions", "openai"),
        ("/v1/responses", "openai"),
        ("/v1/threads/t1/messages", "openai"),  # the Assistants API's messages, not Anthropic's
        ("/completion", "openai"),  # llama.cpp's own API answers errors in OpenAI's shape
        ("/v1/messages", "anthropic"),
        ("/proxy/v1/messages/count_tokens?beta=true", "anthropic"),
        ("/api/chat", "ollama"),
        ("/api/tags", "ollama"),
        ("/ollama/api/generate", "ollama"),
        ("/api/v1/chat/completions", "openai"),  # OpenRouter's OpenAI-style API under /api/v1
        ("", "openai"),
    ],
)
def test_the_error_shape_follows_the_api_of_the_path(path: str, api: str) -> None:
    assert error_api(path) == api


def test_each_api_gets_the_explanation_in_the_field_its_sdks_show() -> None:
    def body(path: str) -> object:
        return json.loads(error_body("why", ErrorType.NO_MATCH, path=path))

    assert body("/v1/chat/completions") == {
        "error": {"message": "why", "type": "streamtape_no_match", "param": None, "code": None}}
    assert body("/v1/messages") == {"type": "error", "error": {"type": "streamtape_no_match", "message": "why"}}
    assert body("/api/chat") == {"error": "why"}


def test_the_default_no_match_status_is_422_not_404_nor_a_5xx() -> None:
    assert NO_MATCH_STATUS == 422


def post(transport: streamtape.ReplayTransport, path: str, body: object) -> httpx.Response:
    with httpx.Client(transport=transport) as c:
        return c.post("http://127.0.0.1:9/" + path.lstrip("/"), json=body)


def test_the_transport_answers_a_no_match_with_the_default_status_and_no_retry() -> None:
    r = post(streamtape.ReplayTransport([chat_ix()], "instant"), "/v1/chat/completions",
             {**CHAT_BODY, "model": "other"})
    assert r.status_code == 422
    assert r.headers["x-should-retry"] == "false"
    assert r.json()["error"]["message"].startswith("no recorded interaction matches POST /v1/chat/completions")


@pytest.mark.parametrize(("no_match", "status"), [(501, 501), ("599", 599), ("404", 404)])
def test_the_transports_no_match_takes_a_status_the_old_404_spelling_included(no_match: object,
                                                                             status: int) -> None:
    t = streamtape.ReplayTransport([chat_ix()], "instant", no_match=no_match)  # type: ignore[arg-type]
    assert post(t, "/api/chat", {"model": "m"}).status_code == status


def test_the_transport_answers_an_ollama_path_in_ollamas_shape() -> None:
    r = post(streamtape.ReplayTransport([chat_ix()], "instant"), "/api/chat", {"model": "m"})
    error = r.json()["error"]
    assert isinstance(error, str) and "closest is #0 POST /v1/chat/completions" in error


@pytest.mark.parametrize("bad", [200, 302, 600, "nope", True])
def test_a_no_match_that_is_no_error_status_nor_raise_is_an_option_error(bad: object) -> None:
    with pytest.raises(OptionError, match=r"no_match=.*expected 'raise' or an error status \(400 to 599\)"):
        streamtape.ReplayTransport([chat_ix()], no_match=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [200, 399, 600])
def test_the_replay_server_takes_only_an_error_status_for_a_no_match(bad: int) -> None:
    with pytest.raises(OptionError, match=r"no_match_status=.*expected an error status, 400 to 599"):
        ReplayServer([chat_ix()], no_match_status=bad)
