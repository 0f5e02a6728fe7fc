"""The SDKs' documented use of the replay transport, checked by ``mypy --strict``.

As check_transport_types.py, not run: tests/unit/test_transport_typing.py runs
mypy over it where openai and anthropic are installed. Both SDKs take an
``httpx2.Client`` / ``httpx2.AsyncClient`` as ``http_client``.
"""

from __future__ import annotations

import anthropic
import httpx2
import openai

import streamtape
from streamtape import Interaction

RECORDINGS: list[Interaction] = []


def openai_clients() -> None:
    t = streamtape.ReplayTransport(RECORDINGS, "chunk=utf8-split;latency=instant")
    client = openai.OpenAI(
        api_key="x", base_url="http://llm.test/v1", http_client=httpx2.Client(transport=t)
    )
    assert client.base_url.host == "llm.test"
    aclient = openai.AsyncOpenAI(
        api_key="x",
        base_url="http://llm.test/v1",
        http_client=httpx2.AsyncClient(transport=streamtape.AsyncReplayTransport(RECORDINGS)),
    )
    assert aclient.base_url.host == "llm.test"


def anthropic_clients() -> None:
    t = streamtape.ReplayTransport(RECORDINGS, "instant")
    client = anthropic.Anthropic(
        api_key="x", base_url="http://llm.test", http_client=httpx2.Client(transport=t)
    )
    assert client.base_url.host == "llm.test"
    aclient = anthropic.AsyncAnthropic(
        api_key="x", base_url="http://llm.test", http_client=httpx2.AsyncClient(transport=t)
    )
    assert aclient.base_url.host == "llm.test"
