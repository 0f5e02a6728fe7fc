"""Re-record the example cassettes in this folder with ``streamtape record``.

    .venv/bin/python -m cassettes.record_examples test-server
    .venv/bin/python -m cassettes.record_examples llama URL   # a running ../shared/llama/serve.sh PORT slow
    .venv/bin/python -m cassettes.record_examples providers [FILE.tape...]  # the hosted formats' cassettes
    .venv/bin/python -m cassettes.record_examples max-tokens URL   # a running ../shared/llama/serve.sh PORT tiny
    .venv/bin/python -m cassettes.record_examples scripted    # the shapes no server here sends

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

from tests.support.builders import DONE, chat_chunk, sse
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
    "openai-assistants.tape": ["assistants-run"],
    "replicate.tape": ["replicate-stream"],
    "watsonx.tape": ["watsonx-stream"],
}
"""Each hosted format's example cassette and the streams it holds."""


def providers(only: list[str] | None = None) -> None:
    """Each cassette of :data:`PROVIDER_FILES` (or only the files named). A stream whose SDK
    follows an absolute URL (Replicate) or takes HTTPS only (watsonx.ai) is recorded with
    the recorder as a regular proxy (``--mode regular --all``; for HTTPS its CA trusted and
    the self-signed upstream accepted with ``--insecure``), as ``provider_sdks.REGULAR_MODE``
    says; every other one through the reverse proxy."""
    import tempfile

    from tests.support import provider_sdks as sdks
    from tests.support import providers as scripted
    from tests.support.servers import self_signed_tls

    streams = scripted.streams()
    confdir = Path(tempfile.mkdtemp(prefix="streamtape-mitm-"))
    with scripted.upstream(gap=0.02) as up, scripted.upstream(gap=0.02, tls=self_signed_tls()) as tls_up:
        for name, held in PROVIDER_FILES.items():
            if only and name not in only:
                continue
            out = HERE / name
            out.unlink(missing_ok=True)
            regular = all(s in sdks.REGULAR_MODE for s in held)
            https = all(s in sdks.HTTPS_ONLY for s in held)
            base = tls_up.url if https else up.url
            args = ["--label", "source=tests/support/providers.py"]
            if regular:
                args += ["--mode", "regular", "--all"]
            if https:
                args += ["--insecure", "--confdir", str(confdir)]
            with recording(out, *args, upstream=None if regular else up.url) as rec:
                for stream in held:
                    target = (sdks.Target(base=base, proxy=rec.url,
                                          ca=str(confdir / "mitmproxy-ca-cert.pem") if https else None)
                              if regular else sdks.Target(base=rec.url))
                    try:
                        answer = sdks.call(stream, target)
                        print(f"{name} {stream}: {answer.text!r} ({answer.finish})")
                    except Exception as e:  # the throttled stream ends in the SDK's exception
                        if streams[stream].error is None:
                            raise
                        print(f"{name} {stream}: {type(e).__name__}: {e}")
                rec.wait_lines(sum(1 + len(streams[s].before) for s in held))


def max_tokens(url: str) -> None:
    """``max-tokens.tape``: a real llama.cpp stream cut by ``max_tokens`` (finish_reason length)."""
    import openai

    out = HERE / "max-tokens.tape"
    out.unlink(missing_ok=True)
    with recording(out, "--label", "backend=llama.cpp", "--label", "model=tiny", upstream=url) as rec:
        oa = openai.OpenAI(base_url=rec.url + "/v1", api_key="sk-example-not-a-secret")
        s = oa.chat.completions.create(model="tiny-llama", messages=[{"role": "user", "content": "Say hello."}],
                                       stream=True, max_tokens=8, seed=5, stream_options={"include_usage": True})
        print("max-tokens:", "".join(c.choices[0].delta.content or "" for c in s if c.choices))
        rec.wait_lines(1)


# --------------------------------------------------------------------------
# Scripted upstreams: the shapes no server on this machine sends, each written as the
# real service writes it (framing, field names, the order of events), recorded through
# ``streamtape record`` with the real client SDK where one exists.

def _chat(delta: dict, finish: str | None = None, **extra: object) -> dict:
    return {"id": "chatcmpl-example", "object": "chat.completion.chunk", "created": 1786000000,
            "model": "example-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def _sse_handler(events: list[bytes], gap: float, *, cut: bool = False):  # type: ignore[no-untyped-def]
    def handle(req, c):  # type: ignore[no-untyped-def]
        c.head(200, SSE_HEADERS)
        for n, ev in enumerate(events):
            if n:
                c.sleep(gap)
            c.chunk(ev)
        if cut:
            c.sleep(gap)
            c.reset()
            return
        c.end_chunks()
    return handle


def _record_one(name: str, label: str, routes: dict, send) -> None:  # type: ignore[no-untyped-def,type-arg]
    out = HERE / name
    out.unlink(missing_ok=True)
    with ScriptedServer(routes) as up, recording(out, "--label", "source=cassettes/record_examples.py",
                                                 "--label", f"example={label}", upstream=up.url) as rec:
        send(rec.url)
        rec.wait_lines(1)
    print(f"{name}: recorded")


def scripted() -> None:
    import asyncio

    import httpx
    import ollama
    import openai

    from tests.support.builders import ndjson
    from tests.support.ws_upstream import realtime_turn, realtime_upstream

    key = "sk-example-not-a-secret"
    msgs = [{"role": "user", "content": "Weather in Paris?"}]

    # Ollama /api/chat: NDJSON, one line per token, the last with done and the counts.
    words = ["The", " sky", " is", " blue", " because", " of", " Rayleigh", " scattering", "."]
    lines = [ndjson({"model": "llama3.2", "created_at": f"2026-08-11T09:00:00.{n:03d}Z",
                     "message": {"role": "assistant", "content": w}, "done": False}) for n, w in enumerate(words)]
    lines.append(ndjson({"model": "llama3.2", "created_at": "2026-08-11T09:00:01Z",
                         "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                         "total_duration": 912000000, "load_duration": 21000000, "prompt_eval_count": 14,
                         "prompt_eval_duration": 88000000, "eval_count": 9, "eval_duration": 790000000}))

    def ollama_handle(req, c):  # type: ignore[no-untyped-def]
        c.head(200, [("Content-Type", "application/x-ndjson"), ("Transfer-Encoding", "chunked")])
        for n, ln in enumerate(lines):
            if n:
                c.sleep(0.03)
            c.chunk(ln)
        c.end_chunks()

    def ollama_send(url: str) -> None:
        cl = ollama.Client(host=url)
        print("ollama:", "".join(p.message.content or "" for p in cl.chat(
            model="llama3.2", messages=[{"role": "user", "content": "Why is the sky blue? One sentence."}], stream=True)))

    _record_one("ollama-chat.tape", "ollama-chat",
                {"/api/chat": ollama_handle}, ollama_send)

    # A tool call whose arguments come in fragments cut anywhere (as OpenAI sends them).
    frags = ['{"', 'city', '":"', 'Par', 'is', '","', 'unit', '":"c', 'elsius', '"}']
    first = {"index": 0, "id": "call_8Yx2", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    tool = [sse(_chat({"role": "assistant", "content": None, "tool_calls": [first]}))]
    tool += [sse(_chat({"tool_calls": [{"index": 0, "function": {"arguments": f}}]})) for f in frags]
    tool += [sse(_chat({}, "tool_calls")), DONE]

    def tool_send(url: str) -> None:
        oa = openai.OpenAI(base_url=url + "/v1", api_key=key)
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}}]
        s = oa.chat.completions.create(model="example-model", messages=msgs, tools=tools, stream=True)
        args = "".join((c.choices[0].delta.tool_calls or [None])[0].function.arguments or ""  # type: ignore[union-attr]
                       for c in s if c.choices and c.choices[0].delta.tool_calls)
        print("tool call:", args)

    _record_one("tool-call.tape", "tool-call",
                {"/v1/chat/completions": _sse_handler(tool, 0.02)}, tool_send)

    # A reasoning stream: delta.reasoning_content first (DeepSeek, vLLM, llama.cpp --reasoning-format),
    # then the answer in delta.content, then the usage with its reasoning tokens.
    thinking = ["The user", " asks 9.11", " vs 9.9.", " 9.9 = 9.90,", " and 90 > 11."]
    answer = ["9.9", " is", " larger."]
    reason = [sse(_chat({"role": "assistant", "content": None, "reasoning_content": ""}))]
    reason += [sse(_chat({"reasoning_content": t})) for t in thinking]
    reason += [sse(_chat({"content": a})) for a in answer]
    reason += [sse(_chat({}, "stop")),
               sse({**_chat({}), "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 31, "total_tokens": 43,
                    "completion_tokens_details": {"reasoning_tokens": 23}}}), DONE]

    def reason_send(url: str) -> None:
        with httpx.stream("POST", url + "/v1/chat/completions", timeout=30, json={
                "model": "example-reasoner", "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "Which is larger, 9.11 or 9.9?"}]}) as r:
            print("reasoning:", r.status_code, sum(len(b) for b in r.iter_raw()), "bytes")

    _record_one("reasoning.tape", "reasoning",
                {"/v1/chat/completions": _sse_handler(reason, 0.02)}, reason_send)

    # A mid-stream error: three tokens, then OpenAI's error event in the 200 stream, then the end.
    err = [sse(_chat({"role": "assistant", "content": ""}))]
    err += [sse(_chat({"content": w})) for w in ["The", " answer", " is"]]
    err += [sse({"error": {"message": "The server had an error while processing your request. Sorry about that!",
                           "type": "server_error", "param": None, "code": None}})]

    def err_send(url: str) -> None:
        oa = openai.OpenAI(base_url=url + "/v1", api_key=key)
        try:
            for _ in oa.chat.completions.create(model="example-model", messages=msgs, stream=True):
                pass
        except openai.APIError as e:
            print("mid-stream error:", type(e).__name__, e)

    _record_one("mid-stream-error.tape", "mid-stream-error",
                {"/v1/chat/completions": _sse_handler(err, 0.03)}, err_send)

    # A Realtime WebSocket session (the GA event names), from the Realtime upstream of the tests.
    out = HERE / "realtime.tape"
    out.unlink(missing_ok=True)
    # The test client puts a (made-up) key in session.update: redacted like any credential field.
    with realtime_upstream() as rt, recording(out, "--label", "source=tests/support/ws_upstream.py",
                                              "--redact-field", "api_key",
                                              upstream=f"http://127.0.0.1:{rt.port}") as rec:
        print("realtime:", len(asyncio.run(realtime_turn(rec.url))), "server events")
        rec.wait_lines(1)


def vcr() -> None:
    """``vcr-imported.tape``: a VCR.py cassette (vcrpy recording an httpx stream from a scripted
    OpenAI server, kept as ``vcr-source.yaml``) imported with ``streamtape import``."""
    import httpx
    import vcr as vcrpy

    from streamtape.cli import main

    src = HERE / "vcr-source.yaml"
    src.unlink(missing_ok=True)
    events = [sse(_chat({"role": "assistant", "content": ""}))]
    events += [sse(_chat({"content": w})) for w in ["Hello", " from", " a", " VCR.py", " cassette", " 日本"]]
    events += [sse(_chat({}, "stop")), DONE]
    body = {"model": "example-model", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    with (
        ScriptedServer({"/v1/chat/completions": _sse_handler(events, 0.02)}) as up,
        vcrpy.use_cassette(str(src), filter_headers=["authorization"]),
        httpx.Client(timeout=30) as c,
        c.stream("POST", up.url + "/v1/chat/completions", json=body,
                 headers={"Authorization": "Bearer sk-example-not-a-secret"}) as r,
    ):
        print("vcr:", r.status_code, sum(len(b) for b in r.iter_raw()), "bytes")
    out = HERE / "vcr-imported.tape"
    out.unlink(missing_ok=True)
    try:
        main(["import", str(src), "-o", str(out)])
    except SystemExit as e:
        assert not e.code, e.code


if __name__ == "__main__":
    if sys.argv[1:2] == ["test-server"]:
        test_server()
    elif sys.argv[1:2] == ["max-tokens"] and len(sys.argv) == 3:
        max_tokens(sys.argv[2])
    elif sys.argv[1:2] == ["scripted"]:
        scripted()
        vcr()
    elif sys.argv[1:2] == ["llama"] and len(sys.argv) == 3:
        llama(sys.argv[2])
    elif sys.argv[1:2] == ["providers"]:
        providers(sys.argv[2:])
    else:
        raise SystemExit(__doc__)
