"""An upstream ``streamtape record`` cannot get a response from, as the client and its SDK see it.

When the upstream refuses the connection, does not resolve, presents a
certificate that fails verification, or closes the connection before its
response head, the client gets a 502 whose body is JSON in its API's error
shape (``streamtape serve``'s own, :func:`streamtape.wire.error_body`), with a
message that names the recording proxy, the upstream and the cause, so the
real SDKs raise their own error type with a readable message, over HTTP/1.1
and HTTP/2 alike. What the recorder keeps is unchanged: the record line, and
the cassette's ``upstream_error`` with mitmproxy's own message.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import ollama
import pytest

import streamtape
from streamtape.cassette.model import Outcome
from tests.support.recording import Recorder, recording
from tests.support.servers import (
    Conn,
    Received,
    ScriptedServer,
    refused_port,
    self_signed_tls,
    trusting,
)

pytestmark = pytest.mark.slow

NEEDS_HTTPX2 = "needs httpx2 and the openai and anthropic SDKs, left out of the test extra on Python 3.11"
MESSAGES = [{"role": "user", "content": "hi"}]
PROXY = "streamtape's recording proxy"
INSECURE = "--insecure records from a backend with a self-signed certificate"


@dataclass
class Behind:
    """A running recorder in front of an upstream that gives no response."""

    rec: Recorder
    upstream: str
    out: Path


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Behind]:
    out = tmp_path_factory.mktemp("refused") / "refused.tape"
    with refused_port() as port, recording(out, upstream=f"http://127.0.0.1:{port}") as rec:
        yield Behind(rec, f"http://127.0.0.1:{port}", out)


@pytest.fixture(scope="module")
def untrusted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Behind]:
    """A recorder without ``--insecure`` in front of an https upstream whose certificate is self-signed."""
    base = tmp_path_factory.mktemp("untrusted")
    with ScriptedServer({"*": lambda req, c: "close"}, tls=self_signed_tls()) as up, \
            recording(base / "tls.tape", "--confdir", str(base / "mitm"), upstream=up.url) as rec:
        yield Behind(rec, up.url, base / "tls.tape")


def refused_message(b: Behind) -> str:
    return f"{PROXY} could not reach the upstream {b.upstream}: connection refused ("


def new_lines(b: Behind, before: int, n: int = 1) -> list[str]:
    return b.rec.wait_lines(before + n)[before:]


def test_a_refused_upstream_gives_the_client_a_json_502_naming_the_upstream_and_the_cause(refused: Behind) -> None:
    before = len(refused.rec.lines)
    r = httpx.post(refused.rec.url + "/v1/chat/completions", json={"messages": MESSAGES}, timeout=10)
    assert r.status_code == 502
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert error["type"] == "streamtape_upstream_error"
    assert error["message"].startswith(refused_message(refused))
    assert "Connect call failed" in error["message"]  # mitmproxy's words, after the sentence
    (line,) = new_lines(refused, before)
    # The record line and the cassette keep mitmproxy's message, as before.
    assert line.startswith("POST /v1/chat/completions ---")
    assert line.endswith(")  [upstream unreachable: the client got a 502]")
    assert PROXY not in line
    ix = streamtape.load(refused.out)[-1]
    assert ix.outcome is Outcome.UPSTREAM_ERROR and ix.response is None
    assert ix.error is not None and "Connect call failed" in ix.error and PROXY not in ix.error


def test_ollamas_client_behind_a_refused_upstream_raises_its_response_error_with_the_message(refused: Behind) -> None:
    client = ollama.Client(host=refused.rec.url)
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="llama-test", messages=MESSAGES)
    assert e.value.status_code == 502
    assert e.value.error.startswith(refused_message(refused))  # the string of {"error": "..."}, not HTML


def test_an_upstream_that_closes_before_its_head_is_named_so(tmp_path: Path) -> None:
    def close_at_once(req: Received, c: Conn) -> str:
        return "close"

    with ScriptedServer({"*": close_at_once}) as up, recording(tmp_path / "c.tape", upstream=up.url) as rec:
        r = httpx.post(rec.url + "/v1/chat/completions", json={}, timeout=10)
        (line,) = rec.wait_lines(1)
    assert r.status_code == 502 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["message"] == (
        f"{PROXY} got no response from the upstream {up.url}: "
        "it closed the connection before sending a response (server closed connection)"
    )
    assert "upstream_error (server closed connection)  [upstream unreachable: the client got a 502]" in line


def test_every_worker_of_record_workers_answers_in_json(tmp_path: Path) -> None:
    with refused_port() as port, \
            recording(tmp_path / "w.tape", "--workers", "2", upstream=f"http://127.0.0.1:{port}") as rec:
        with httpx.Client(timeout=10) as client:  # new connections: the kernel spreads them over the workers
            seen = [client.post(rec.url + "/v1/chat/completions", json={}, headers={"Connection": "close"})
                    for _ in range(6)]
        rec.wait_lines(6)
    assert {(r.status_code, r.headers["content-type"]) for r in seen} == {(502, "application/json")}
    assert all(r.json()["error"]["type"] == "streamtape_upstream_error" for r in seen)


def test_a_regular_proxy_names_the_host_the_request_was_for(tmp_path: Path) -> None:
    with refused_port() as port, recording(tmp_path / "r.tape", "--mode", "regular") as rec, \
            httpx.Client(proxy=rec.url, timeout=10) as client:
        r = client.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={})
        (line,) = rec.wait_lines(1)
    assert r.status_code == 502 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["message"].startswith(
        f"{PROXY} could not reach the upstream http://127.0.0.1:{port}: connection refused (")
    assert line.endswith("  [upstream unreachable: the client got a 502]")


def test_a_response_the_upstream_began_is_still_passed_on_as_it_came(tmp_path: Path) -> None:
    """Only a request with no response head is answered by the proxy: a 503 of the
    upstream's own reaches the client as it was sent, body and all."""

    def busy(req: Received, c: Conn) -> str:
        c.head(503, [("Content-Type", "text/plain"), ("Content-Length", "4")])
        c.raw(b"busy")
        return "close"

    with ScriptedServer({"*": busy}) as up, recording(tmp_path / "b.tape", "--all", upstream=up.url) as rec:
        r = httpx.get(rec.url + "/v1/models", timeout=10)
        rec.wait_lines(1)
    assert (r.status_code, r.headers["content-type"], r.text) == (503, "text/plain", "busy")


def test_an_http2_client_gets_the_json_502_in_an_http2_response(untrusted: Behind, tmp_path: Path) -> None:
    before = len(untrusted.rec.lines)
    url = untrusted.rec.url.replace("http://", "https://") + "/v1/chat/completions"
    confdir = untrusted.out.parent / "mitm"
    with httpx.Client(http2=True, verify=trusting(confdir), timeout=10) as client:
        r = client.post(url, json={"messages": MESSAGES})
    assert r.http_version == "HTTP/2"
    assert r.status_code == 502 and r.headers["content-type"] == "application/json"
    message = r.json()["error"]["message"]
    assert message.startswith(f"{PROXY} could not reach the upstream {untrusted.upstream}: "
                              "its TLS certificate failed verification (")
    assert message.endswith(f"); {INSECURE}")
    (line,) = new_lines(untrusted, before)
    assert line.endswith(f"  [upstream TLS certificate not trusted: the client got a 502; {INSECURE}]")


# -- the SDKs on httpx2 (Python 3.12+) -------------------------------------------------------


@pytest.mark.httpx2
def test_the_openai_sdk_behind_a_refused_upstream_raises_a_502_whose_message_names_the_upstream(
    refused: Behind,
) -> None:
    openai = pytest.importorskip("openai", reason=NEEDS_HTTPX2)
    before = len(refused.rec.lines)
    # One retry: the SDK retries a 502 as it would a gateway's (no X-Should-Retry: false).
    client = openai.OpenAI(base_url=refused.rec.url + "/v1", api_key="sk-test", max_retries=1)
    with pytest.raises(openai.APIStatusError) as e:
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert type(e.value) is openai.InternalServerError
    assert e.value.status_code == 502
    assert str(e.value).startswith(f"Error code: 502 - {refused_message(refused)}")
    assert e.value.type == "streamtape_upstream_error"
    assert len(new_lines(refused, before, 2)) == 2  # asked twice, each recorded


@pytest.mark.httpx2
def test_the_anthropic_sdk_behind_a_refused_upstream_raises_with_the_message_in_its_error_shape(
    refused: Behind,
) -> None:
    anthropic = pytest.importorskip("anthropic", reason=NEEDS_HTTPX2)
    client = anthropic.Anthropic(base_url=refused.rec.url, api_key="sk-ant-test", max_retries=0)
    with pytest.raises(anthropic.InternalServerError) as e:
        client.messages.create(model="claude-test", max_tokens=16, messages=MESSAGES)
    assert e.value.status_code == 502
    assert e.value.body == {"type": "error", "error": {"type": "streamtape_upstream_error",
                                                       "message": e.value.body["error"]["message"]}}
    assert refused_message(refused) in str(e.value)


@pytest.mark.httpx2
def test_the_openai_sdk_behind_an_untrusted_certificate_is_told_about_insecure(untrusted: Behind) -> None:
    openai = pytest.importorskip("openai", reason=NEEDS_HTTPX2)
    before = len(untrusted.rec.lines)
    client = openai.OpenAI(base_url=untrusted.rec.url + "/v1", api_key="sk-test", max_retries=0)
    with pytest.raises(openai.InternalServerError) as e:
        client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert e.value.status_code == 502
    assert "its TLS certificate failed verification (Certificate verify failed" in str(e.value)
    assert str(e.value).endswith(INSECURE)
    (line,) = new_lines(untrusted, before)
    assert line.endswith(f"  [upstream TLS certificate not trusted: the client got a 502; {INSECURE}]")
    ix = streamtape.load(untrusted.out)[-1]
    assert ix.outcome is Outcome.UPSTREAM_ERROR and ix.error is not None and PROXY not in ix.error
