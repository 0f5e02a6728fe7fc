"""Recording a server nobody here wrote: llama.cpp's llama-server, through ``streamtape record``,
with the openai SDK and httpx as clients."""

from __future__ import annotations

import statistics
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape.shapes import analyze
from tests.support.llama import llama_server
from tests.support.recording import recording

pytestmark = [pytest.mark.llama, pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def llama_slow():
    with llama_server("slow") as url:
        yield url


@pytest.mark.httpx2
def test_openai_sdk_stream_from_llama_server_is_recorded_exactly(llama_slow: str, tmp_path: Path) -> None:
    import openai

    out = tmp_path / "llama.tape"
    with recording(out, "--label", "backend=llama.cpp", upstream=llama_slow) as rec:
        client = openai.OpenAI(base_url=rec.url + "/v1", api_key="sk-llama-test-secret")
        stream = client.chat.completions.create(
            model="tiny-llama",
            messages=[{"role": "user", "content": "Say hello."}],
            stream=True,
            max_tokens=40,
            seed=5,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        sdk_text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        with httpx.stream("POST", rec.url + "/completion", json={"prompt": "Hi", "n_predict": 20, "stream": True}, timeout=60) as r:
            native = b"".join(r.iter_raw())
        rec.wait_lines(2)
    assert b"sk-llama-test-secret" not in out.read_bytes()
    chat, comp = streamtape.load(out)
    # The openai SDK hangs up at [DONE]; when that beats llama-server's
    # terminating chunk to the proxy, mitmproxy reports the client leaving.
    assert chat.outcome in ("complete", "client_disconnected"), chat.error
    assert comp.outcome == "complete"
    assert chat.response is not None
    assert chat.response.header("server") == "llama.cpp"
    assert chat.response.framing == "chunked"
    a = analyze(chat)
    assert a.shape == "openai-chat"
    assert a.text == sdk_text and sdk_text
    assert a.done and a.finish is not None and a.finish.reason == "length"
    assert a.usage is not None and a.usage.completion_tokens == 40  # cut by max_tokens
    assert chat.pieces[-1].data.endswith(b"data: [DONE]\n\n")
    # The slow model makes a token about every 10 ms; the recording keeps that rhythm.
    gaps = [(b.at_ns - x.at_ns) / 1e6 for x, b in zip(chat.pieces, chat.pieces[1:], strict=False)]
    # (On a busy machine the model itself is slower: a median of 72 ms was seen beside a
    # second suite, 311 ms beside two. The lower bound tells pieces kept apart from a body
    # held and sent whole; the upper one only a recorder that sat on them for seconds.)
    assert 3 <= statistics.median(gaps) <= 1000
    assert comp.response is not None
    assert comp.response.body == native
    assert analyze(comp).shape == "llamacpp"
