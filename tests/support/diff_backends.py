"""The scripted backends the diff tests record: one upstream, one scenario per request.

The scenario is picked by the ``X-Scenario`` request header (headers never
take part in pairing). :func:`record_each` records every scenario once through
the real ``streamtape record`` (mitmproxy) and saves each interaction to its own
cassette; the ``recorded`` fixture in ``tests/conftest.py`` does it once per
session for tests/system/test_diff.py and tests/system/test_diff_html.py.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import httpx

import streamtape
from streamtape import Interaction
from tests.support.builders import chat_events, ndjson, sse
from tests.support.recording import record_scenarios
from tests.support.servers import SSE_HEADERS, Conn, Handler, Received, ScriptedServer, by_scenario

WORDS = ["Hello", " there", ",", " wörld", " & <friends>", "!"]
TEXT = "".join(WORDS)
HELLO_BODY = {"model": "m", "messages": [{"role": "user", "content": "Say hello"}], "stream": True}
TOOLS_BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather"}}],
    "stream": True,
}
OLLAMA_BODY = {"model": "llama3.1", "messages": [{"role": "user", "content": "Say hello"}], "stream": True}


def tool_events(call_id: str, fragments: list[str]) -> list[bytes]:
    """An OpenAI chat stream of one ``get_weather`` call whose arguments come in ``fragments``."""

    def tc(delta: dict[str, object], finish: str | None = None) -> bytes:
        return sse(
            {
                "id": "chatcmpl-tools",
                "object": "chat.completion.chunk",
                "model": "test-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    first = {"index": 0, "id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    return [
        tc({"role": "assistant", "content": None, "tool_calls": [first]}),
        *(tc({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in fragments),
        tc({}, "tool_calls"),
        sse("[DONE]"),
    ]


def ollama_lines(words: list[str]) -> list[bytes]:
    """Ollama ``/api/chat`` NDJSON: one line per word, then ``done`` with the token counts."""
    lines: list[dict[str, object]] = [
        {"model": "llama3.1", "created_at": "2026-08-11T09:00:00Z", "message": {"role": "assistant", "content": w}, "done": False}
        for w in words
    ]
    lines.append(
        {
            "model": "llama3.1",
            "created_at": "2026-08-11T09:00:01Z",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "total_duration": 1290000000,
            "prompt_eval_count": 7,
            "eval_count": 6,
        }
    )
    return [ndjson(x) for x in lines]


def rechunk(data: bytes, size: int) -> list[bytes]:
    """Pieces of ``size`` bytes, plus one boundary inside the first "ö" (a cut character)."""
    cut = data.index("ö".encode()) + 1
    bounds = sorted({0, *range(size, len(data), size), cut, len(data)})
    return [data[x:y] for x, y in itertools.pairwise(bounds)]


def write_chunks(
    pieces: list[bytes], *, gap: float, headers: Sequence[tuple[str, str]] = SSE_HEADERS, first_delay: float = 0.0
) -> Handler:
    """Chunked, one piece per chunk, with a Date and an X-Request-Id that differ per response."""

    def handle(req: Received, c: Conn) -> None:
        c.head(200, [*headers, ("Date", "Mon, 30 Nov 2026 12:00:00 GMT"), ("X-Request-Id", req.path + str(id(req)))])
        c.chunked(pieces, gap, first_delay)

    return handle


HELLO = chat_events(WORDS)
NDJSON_HEADERS = [("Content-Type", "application/x-ndjson"), ("Transfer-Encoding", "chunked")]

# name: (path, request body as sent, handler)
SCENARIOS: dict[str, tuple[str, bytes, Handler]] = {
    "hello": ("/v1/chat/completions", json.dumps(HELLO_BODY).encode(), write_chunks(HELLO, gap=0.01)),
    # The same bytes in 61-byte pieces: events cut mid-way, "ö" cut in two. The request
    # body is the same JSON with other key order and spacing.
    "hello_rechunked": (
        "/v1/chat/completions",
        json.dumps(dict(reversed(HELLO_BODY.items())), indent=2).encode(),
        write_chunks(rechunk(b"".join(HELLO), 61), gap=0.004, headers=[*SSE_HEADERS, ("X-Served-By", "gateway")]),
    ),
    "hello_moon": (
        "/v1/chat/completions",
        json.dumps(HELLO_BODY).encode(),
        write_chunks(chat_events(["Hello", " there", ",", " moon", "!"]), gap=0.01),
    ),
    "hello_length": (
        "/v1/chat/completions",
        json.dumps(HELLO_BODY).encode(),
        write_chunks(chat_events(WORDS, finish="length"), gap=0.01),
    ),
    "hello_slow": (
        "/v1/chat/completions",
        json.dumps(HELLO_BODY).encode(),
        write_chunks(HELLO, gap=0.01, first_delay=0.3),
    ),
    "tools": (
        "/v1/chat/completions",
        json.dumps(TOOLS_BODY).encode(),
        write_chunks(tool_events("call_1", ['{"city": "Par', 'is", "unit": "cel', 'sius", "days": 2}']), gap=0.01),
    ),
    "tools_reordered": (
        "/v1/chat/completions",
        json.dumps(dict(reversed(TOOLS_BODY.items()))).encode(),
        write_chunks(tool_events("call_xyz", ['{"days":2,', '"unit":"celsius","city":"Paris"}']), gap=0.01),
    ),
    "tools_other_city": (
        "/v1/chat/completions",
        json.dumps(TOOLS_BODY).encode(),
        write_chunks(tool_events("call_2", ['{"city": "Lyon", "unit": "celsius", "days": 2}']), gap=0.01),
    ),
    "hello_error": (
        "/v1/chat/completions",
        json.dumps(HELLO_BODY).encode(),
        write_chunks([*HELLO[:3], sse({"error": {"message": "model overloaded", "type": "server_error"}})], gap=0.01),
    ),
    "ollama": ("/api/chat", json.dumps(OLLAMA_BODY).encode(), write_chunks(ollama_lines(WORDS), gap=0.01, headers=NDJSON_HEADERS)),
}


def record_each(folder: Path) -> dict[str, Path]:
    """Every scenario recorded once through ``streamtape record``; one cassette each."""
    up = ScriptedServer({"*": by_scenario({name: handler for name, (_, _, handler) in SCENARIOS.items()})})
    with up, httpx.Client(timeout=10) as client:

        def send(url: str, name: str) -> None:
            path, body, _ = SCENARIOS[name]
            headers = {"Content-Type": "application/json", "X-Scenario": name}
            with client.stream("POST", url + path, content=body, headers=headers) as r:
                assert r.status_code == 200
                r.read()

        recorded = record_scenarios(folder / "all.tape", up.url, list(SCENARIOS), send)
    out = {}
    for scenario, ix in recorded.interactions.items():
        assert ix.request.header("x-scenario") == scenario
        assert ix.outcome == "complete", (scenario, ix.error)
        out[scenario] = folder / f"{scenario}.tape"
        streamtape.save(out[scenario], [ix])
    return out


def one(path: Path) -> Interaction:
    """The one interaction of a scenario's cassette."""
    (ix,) = streamtape.load(path)
    return ix
