"""The documented uses of the in-process transports, checked by ``mypy --strict``.

Not a test module (pytest does not collect it, nothing here is run):
tests/unit/test_transport_typing.py runs mypy over this file, so a change that
makes ``httpx.Client(transport=ReplayTransport(...))`` (or any other line here)
a type error for a user fails CI. ``ReplayTransport`` is no runtime subclass
of httpx's or httpx2's ``BaseTransport``; these lines pin that the type
checker accepts it wherever a client takes a transport, and that calling it
directly gives the response class of the request's package.
The SDKs' ``http_client=`` are in check_sdk_transport_types.py.
"""

from __future__ import annotations

from typing import assert_type

import httpx
import httpx2

import streamtape
from streamtape import AsyncReplayTransport, Interaction, ReplayTransport
from streamtape.transport import ReplayTransport as ReplayTransportFromSubpackage

RECORDINGS: list[Interaction] = []


def sync_clients() -> None:
    with ReplayTransport(RECORDINGS, "instant") as t:
        assert_type(t, ReplayTransport)
        sync: httpx.BaseTransport = t
        sync2: httpx2.BaseTransport = t
        sync.close()
        sync2.close()
    httpx.Client(transport=ReplayTransport(RECORDINGS))
    httpx2.Client(transport=ReplayTransport(RECORDINGS, "instant", realtime=False))
    httpx2.Client(transport=ReplayTransportFromSubpackage(RECORDINGS, package="httpx2"))
    httpx.Client(mounts={"http://llm.test": streamtape.ReplayTransport(RECORDINGS)})
    transport = streamtape.ReplayTransport(RECORDINGS, no_match="raise")
    with httpx2.Client(transport=transport, base_url="http://llm.test") as client:
        response: httpx2.Response = client.get("/v1/models")
        assert response.status_code == 200


async def async_clients() -> None:
    async with AsyncReplayTransport(RECORDINGS, "instant") as t:
        assert_type(t, ReplayTransport)
        asynchronous: httpx.AsyncBaseTransport = t
        asynchronous2: httpx2.AsyncBaseTransport = t
        await asynchronous.aclose()
        await asynchronous2.aclose()
    httpx.AsyncClient(transport=AsyncReplayTransport(RECORDINGS))
    httpx2.AsyncClient(transport=AsyncReplayTransport(RECORDINGS))
    # one class serves both kinds of client
    httpx2.AsyncClient(transport=streamtape.ReplayTransport(RECORDINGS))
    async with httpx.AsyncClient(transport=AsyncReplayTransport(RECORDINGS)) as client:
        response: httpx.Response = await client.get("http://llm.test/v1/models")
        assert response.status_code == 200


def direct_calls() -> None:
    """A transport called directly returns the response class of the request's package."""
    t = ReplayTransport(RECORDINGS, "instant")
    assert_type(t.handle_request(httpx.Request("GET", "http://llm.test/")), httpx.Response)
    assert_type(t.handle_request(httpx2.Request("GET", "http://llm.test/")), httpx2.Response)


async def direct_async_calls() -> None:
    t = AsyncReplayTransport(RECORDINGS, "instant")
    r1 = await t.handle_async_request(httpx.Request("GET", "http://llm.test/"))
    r2 = await t.handle_async_request(httpx2.Request("GET", "http://llm.test/"))
    assert_type(r1, httpx.Response)
    assert_type(r2, httpx2.Response)

