"""Re-record the example cassettes in this folder with ``streamtape record``.

    .venv/bin/python -m cassettes.record_examples test-server
    .venv/bin/python -m cassettes.record_examples llama URL   # a running ../shared/llama/serve.sh PORT slow
    .venv/bin/python -m cassettes.record_examples providers  # the hosted formats' cassettes

(run from the checkout, as the benchmarks are: ``cassettes`` is a package there
so that this script imports ``tests.support`` with no ``sys.path`` edit).

``test-server.tape``: an OpenAI-style chat stream from the scripted test server
in ``tests/support/servers.py`` (20 ms between events, a keep-alive comment, a
character cut between two writes), recorded through ``streamtape record`` with
the openai SDK as the client.

``llama-cpp.tape``: real streams from llama.cpp's llama-server (the ``slow``
generated model of ../shared/llama, about 100 tokens/s), recorded through
``streamtape record`` with the openai and anthropic SDKs and httpx as clients:
chat with usage (ended by a stop sequence), chat cut by max_tokens, native /completion and Anthropic
Messages.

``providers``: one cassette per hosted format (``PROVIDER_FILES``), each stream of
``tests/support/providers.py`` recorded through ``streamtape record`` with the
provider's official SDK as the client (``tests/support/provider_sdks.py``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.support.builders import chat_chunk
from tests.support.recording import recording
from tests.support.servers import SSE_HEADERS, ScriptedServer

HERE = Path(__file__).resolve().parent


def _event(obj: dict | str) -> bytes:
    payload = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


def test_server() -> None:
    import openai

    words = ["Stream", "ing", " is", " 日本", "語", " for", " every", "one", "."]
    events = [_event(chat_chunk("", role="assistant"))] + [_event(chat_chunk(w)) for w in words]
    events += [_event(chat_chunk(finish="stop")), _event("[DONE]")]
    cut = events[4].index("日".encode()) + 1  # inside the first byte sequence of 日

    def handle(req, c):  # type: ignore[no-untyped-def]
        c.head(200, SSE_HEADERS)
        for n, ev in enumerate(events):
            if n == 4:
                c.chunk(ev[:cut])
                c.sleep(0.02)
                c.chunk(ev[cut:])
            else:
                c.chunk(ev)
            if n == 6:
                c.sleep(0.02)
                c.chunk(b": keep-alive\n\n")
            if n < len(events) - 1:
                c.sleep(0.02)
        c.end_chunks()

    out = HERE / "test-server.tape"
    out.unlink(missing_ok=True)
    with ScriptedServer({"/v1/chat/completions": handle}) as up, recording(out, "--label", "source=tests/servers.py", upstream=up.url) as rec:
        client = openai.OpenAI(base_url=rec.url + "/v1", api_key="sk-example-not-a-secret")
        stream = client.chat.completions.create(model="test-model", messages=[{"role": "user", "content": "Say something."}], stream=True)
        print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
        rec.wait_lines(1)


def llama(url: str) -> None:
    import anthropic
    import httpx
    import openai

    out = HERE / "llama-cpp.tape"
    out.unlink(missing_ok=True)
    with recording(out, "--label", "backend=llama.cpp", "--label", "model=slow", upstream=url) as rec:
        oa = openai.OpenAI(base_url=rec.url + "/v1", api_key="sk-example-not-a-secret")
        msgs = [{"role": "user", "content": "Say hello."}]
        s = oa.chat.completions.create(model="tiny-llama", messages=msgs, stream=True, max_tokens=200, seed=9,
                                       stop=["\n"], stream_options={"include_usage": True})
        print("chat:", "".join(c.choices[0].delta.content or "" for c in s if c.choices))
        s = oa.chat.completions.create(model="tiny-llama", messages=msgs, stream=True, max_tokens=12, seed=7)
        print("chat (length):", "".join(c.choices[0].delta.content or "" for c in s if c.choices))
        with httpx.stream("POST", rec.url + "/completion", json={"prompt": "Hello", "n_predict": 40, "stream": True, "seed": 3}, timeout=60) as r:
            print("native:", r.status_code, sum(len(b) for b in r.iter_raw()), "bytes")
        an = anthropic.Anthropic(base_url=rec.url, api_key="sk-ant-example-not-a-secret")
        with an.messages.stream(model="tiny-llama", max_tokens=30, messages=msgs) as ms:
            print("anthropic:", "".join(ms.text_stream))
        time.sleep(0.5)
        rec.wait_lines(4)


PROVIDER_FILES = {
    "gemini.tape": ["gemini-sse"],
    "vertex-crlf.tape": ["gemini-crlf"],
    "gemini-array.tape": ["gemini-array"],
    "bedrock-converse.tape": ["bedrock-converse", "bedrock-throttled"],
    "bedrock-invoke.tape": ["bedrock-invoke"],
    "cohere.tape": ["cohere-chat"],
    "mistral.tape": ["mistral-chat"],
    "azure-openai.tape": ["azure-chat"],
}
"""Each hosted format's example cassette and the streams it holds."""


def providers() -> None:
    from tests.support import provider_sdks as sdks
    from tests.support import providers as scripted

    streams = scripted.streams()
    with scripted.upstream(gap=0.02) as up:
        for name, held in PROVIDER_FILES.items():
            out = HERE / name
            out.unlink(missing_ok=True)
            with recording(out, "--label", "source=tests/support/providers.py", upstream=up.url) as rec:
                for stream in held:
                    try:
                        answer = sdks.call(stream, sdks.Target(base=rec.url))
                        print(f"{name} {stream}: {answer.text!r} ({answer.finish})")
                    except Exception as e:  # the throttled stream ends in the SDK's exception
                        if streams[stream].error is None:
                            raise
                        print(f"{name} {stream}: {type(e).__name__}: {e}")
                rec.wait_lines(len(held))


if __name__ == "__main__":
    if sys.argv[1:2] == ["test-server"]:
        test_server()
    elif sys.argv[1:2] == ["llama"] and len(sys.argv) == 3:
        llama(sys.argv[2])
    elif sys.argv[1:2] == ["providers"]:
        providers()
    else:
        raise SystemExit(__doc__)
