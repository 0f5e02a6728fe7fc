"""Streams as real servers send them, not as the reference says.

- a chat stream whose chunks say ``"object": "text_completion"`` (some
  OpenAI-compatible servers do): the choices' structure decides the format;
- ``n > 1``: every choice assembled (text, tool calls, finish), with ``logprobs``
  on every chunk; a refusal (``delta.refusal``) kept out of the answer;
- legacy completions with their ``logprobs`` object;
- zstd bodies (the openai and anthropic SDKs ask for zstd): decoded for the
  analysis, recorded as they came.

Each stream is sent by a scripted upstream on 127.0.0.1 and recorded through
the real ``streamtape record``; the tests read the cassette.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import httpx
import pytest

import streamtape
from streamtape.check import check
from streamtape.shapes import analyze, decoded_body
from streamtape.stats import compute
from tests.support.builders import sse
from tests.support.recording import Scenarios, record_scenarios, recording, run_main
from tests.support.servers import (
    SSE_HEADERS,
    Conn,
    Handler,
    Received,
    ScriptedServer,
    by_scenario,
    sse_events,
)

zstd: ModuleType | None
try:  # what mitmproxy 12 installs (the standard library's own from Python 3.14)
    from backports import zstd
except ImportError:  # pragma: no cover - Python 3.11: mitmproxy 11 brings zstandard instead
    zstd = None

needs_zstd = pytest.mark.skipif(zstd is None, reason="no backports.zstd to compress with here (pip install backports.zstd; mitmproxy 12, on Python 3.12+, brings it)")

GAP = 0.01
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def chunk(choices: list[dict[str, object]], *, obj: str = "chat.completion.chunk",
          **extra: object) -> bytes:
    return sse({"id": "chatcmpl-x", "object": obj, "created": 1756000000, "model": "m",
                "choices": choices, **extra})


def logprobs(token: str) -> dict[str, object]:
    """A chat ``logprobs`` object for one token, as OpenAI sends it with ``logprobs: true``."""
    return {"content": [{"token": token, "logprob": -0.25, "bytes": list(token.encode()),
                         "top_logprobs": [{"token": token, "logprob": -0.25,
                                           "bytes": list(token.encode())}]}],
            "refusal": None}


# ---------------------------------------------------------------------------
# The streams

MISLABELLED_WORDS = ["Labels", " are", " not", " structure", "."]
# A chat stream labelled "text_completion" on every chunk, after an Azure-style first
# chunk whose choices are empty (its prompt_filter_results tell nothing of the format).
MISLABELLED = [
    sse({"id": "", "object": "", "created": 0, "model": "", "choices": [],
         "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]}),
    chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
          obj="text_completion"),
    *(chunk([{"index": 0, "delta": {"content": w}, "finish_reason": None}], obj="text_completion")
      for w in MISLABELLED_WORDS),
    chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}], obj="text_completion"),
    sse("[DONE]"),
]

N2_WORDS = ["Paris", " is", " sunny", " and"]
N2_ARGS = ['{"ci', 'ty": "Pa', 'ris"}']
# n=2: choice 0 answers in words and is cut by max_tokens; choice 1 calls a tool whose
# arguments come in fragments. Each chunk carries logprobs.
N2 = [
    chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
            "finish_reason": None},
           {"index": 1, "delta": {"role": "assistant", "content": None}, "logprobs": None,
            "finish_reason": None}]),
    chunk([{"index": 1, "delta": {"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                                   "function": {"name": "get_weather", "arguments": ""}}]},
            "logprobs": None, "finish_reason": None}]),
]
for _w, _a in zip(N2_WORDS, [*N2_ARGS, None], strict=True):
    N2.append(chunk([{"index": 0, "delta": {"content": _w}, "logprobs": logprobs(_w),
                      "finish_reason": None}]))
    if _a is not None:
        N2.append(chunk([{"index": 1, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": _a}}]},
                          "logprobs": {"content": None, "refusal": None}, "finish_reason": None}]))
N2 += [
    chunk([{"index": 1, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}]),
    chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}]),
    chunk([], usage={"prompt_tokens": 20, "completion_tokens": 13, "total_tokens": 33}),
    sse("[DONE]"),
]

REFUSAL_PARTS = ["I'm sorry,", " I can't", " help with that."]
REFUSAL = [
    chunk([{"index": 0, "delta": {"role": "assistant", "content": None, "refusal": ""},
            "logprobs": None, "finish_reason": None}]),
    *(chunk([{"index": 0, "delta": {"refusal": r}, "logprobs": {"content": None, "refusal": []},
              "finish_reason": None}]) for r in REFUSAL_PARTS),
    chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]),
    sse("[DONE]"),
]

COMPLETION_WORDS = ["Once", " upon", " a", " time"]
COMPLETIONS = [
    *(sse({"id": "cmpl-1", "object": "text_completion", "created": 1756000000, "model": "m",
           "choices": [{"text": w, "index": 0, "finish_reason": None,
                        "logprobs": {"tokens": [w], "token_logprobs": [-0.5],
                                     "top_logprobs": [{w: -0.5, " other": -1.5}],
                                     "text_offset": [i]}}]})
      for i, w in enumerate(COMPLETION_WORDS)),
    sse({"id": "cmpl-1", "object": "text_completion", "created": 1756000000, "model": "m",
         "choices": [{"text": "", "index": 0, "finish_reason": "length", "logprobs": None}]}),
    sse("[DONE]"),
]

ZSTD_WORDS = ["Com", "pressed", " all", " the", " way", "."]
ZSTD_EVENTS = [
    chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]),
    *(chunk([{"index": 0, "delta": {"content": w}, "finish_reason": None}]) for w in ZSTD_WORDS),
    chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
    sse("[DONE]"),
]


# ---------------------------------------------------------------------------
# The upstream


def plain(events: list[bytes]) -> Handler:
    return sse_events(events, GAP)


def zstd_sse(events: list[bytes], *, frame_per_event: bool) -> Handler:
    """A zstd-encoded SSE body when the client accepts zstd: one compressor flushed
    after each event (one frame for the body), or one frame per event."""

    assert zstd is not None

    def handle(req: Received, c: Conn) -> None:
        accept = req.header("accept-encoding") or ""
        assert "zstd" in accept, f"the client did not ask for zstd: {accept!r}"
        c.head(200, [*SSE_HEADERS, ("Content-Encoding", "zstd")])
        comp = zstd.ZstdCompressor()
        for i, ev in enumerate(events):
            if i:
                c.sleep(GAP)
            if frame_per_event:
                c.chunk(zstd.compress(ev))
            else:
                last = i == len(events) - 1
                c.chunk(comp.compress(ev, zstd.ZstdCompressor.FLUSH_FRAME if last
                                      else zstd.ZstdCompressor.FLUSH_BLOCK))
        c.end_chunks()

    return handle


HANDLERS: dict[str, Handler] = {
    "mislabelled": plain(MISLABELLED),
    "n2": plain(N2),
    "refusal": plain(REFUSAL),
    "completions": plain(COMPLETIONS),
}
if zstd is not None:
    HANDLERS["zstd"] = zstd_sse(ZSTD_EVENTS, frame_per_event=False)
    HANDLERS["zstd-frames"] = zstd_sse(ZSTD_EVENTS, frame_per_event=True)
PATHS = {"completions": "/v1/completions"}


def server() -> ScriptedServer:
    route = by_scenario(HANDLERS)
    return ScriptedServer({"/v1/chat/completions": route, "/v1/completions": route})


def send(url: str, name: str) -> None:
    headers = {"X-Scenario": name}
    if name.startswith("zstd"):
        headers["Accept-Encoding"] = "gzip, deflate, br, zstd"  # what the SDKs send
    path = PATHS.get(name, "/v1/chat/completions")
    with httpx.stream("POST", url + path, headers=headers, timeout=30, json={"model": "m", "stream": True}) as r:
        assert r.status_code == 200
        b"".join(r.iter_raw())  # raw: httpx here has no zstd decoder of its own


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Scenarios:
    with server() as up:
        return record_scenarios(tmp_path_factory.mktemp("shapes") / "shapes.tape", up.url, list(HANDLERS), send)


# ---------------------------------------------------------------------------
# Format from structure


def test_chat_deltas_labelled_text_completion_are_read_as_chat(recorded: Scenarios) -> None:
    a = analyze(recorded.interactions["mislabelled"])
    assert a.shape == "azure-openai"  # chat (OpenAI's meaning), named by Azure's first chunk
    assert a.text == "".join(MISLABELLED_WORDS)
    assert a.finish is not None and a.finish.reason == "stop" and a.done


def test_legacy_completions_with_logprobs_assemble_their_text(recorded: Scenarios) -> None:
    ix = recorded.interactions["completions"]
    a = analyze(ix)
    assert a.shape == "openai-completions"
    assert a.text == "".join(COMPLETION_WORDS)
    assert a.finish is not None and a.finish.reason == "length"
    assert not a.invalid_json and not a.errors


# ---------------------------------------------------------------------------
# n > 1, refusals, logprobs


def test_every_choice_is_assembled_with_its_own_text_tool_calls_and_finish(recorded: Scenarios) -> None:
    a = analyze(recorded.interactions["n2"])
    assert [c.index for c in a.choices] == [0, 1]
    first, second = a.choices
    assert first.text == "".join(N2_WORDS) and not first.tool_calls
    assert first.finish is not None and first.finish.reason == "length"
    assert second.text == "" and second.finish is not None and second.finish.reason == "tool_calls"
    (call,) = second.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_9", "get_weather", "".join(N2_ARGS))
    assert call.parsed == json.loads("".join(N2_ARGS)) and call.valid_json
    # The analysis's own fields are choice 0's, as before.
    assert (a.text, a.tool_calls, a.finish) == (first.text, first.tool_calls, first.finish)
    assert a.usage is not None and a.usage.completion_tokens == 13
    codes = {(f.code, f.message.split(":")[0]) for f in check(recorded.interactions["n2"], a)}
    assert ("finish-length", "choice 0") in codes


def test_show_text_prints_each_choice_and_json_carries_each_choice(
        recorded: Scenarios, capsys: pytest.CaptureFixture[str]) -> None:
    i = str(recorded.index["n2"])
    code, out, _ = run_main("show", recorded.path, "-i", i, "--text", capsys=capsys)
    assert code == 0
    assert out == f"[choice 0]\n{''.join(N2_WORDS)}\n[choice 1]\n"
    code, out, _ = run_main("show", recorded.path, "-i", i, "--json", capsys=capsys)
    doc = json.loads(out)
    c0, c1 = doc["result"]["choices"]
    assert c0["text"] == "".join(N2_WORDS) and c0["finish"] == {"reason": "length", "raw": "length"}
    assert c1["tool_calls"] == [{"index": 0, "id": "call_9", "name": "get_weather",
                                 "arguments": "".join(N2_ARGS),
                                 "parsed": json.loads("".join(N2_ARGS)), "valid_json": True}]
    assert doc["result"]["usage"]["completion_tokens"] == 13
    assert doc["analysis"]["choices"] == 2
    code, out, _ = run_main("show", recorded.path, "-i", i, capsys=capsys)
    assert "choices: #0 length" in out and "#1 tool_calls" in out


def test_a_refusal_is_surfaced_as_such_and_is_not_answer_text(
        recorded: Scenarios, capsys: pytest.CaptureFixture[str]) -> None:
    ix = recorded.interactions["refusal"]
    a = analyze(ix)
    assert a.refusal == "".join(REFUSAL_PARTS) and a.text == ""
    assert [e.text for e in a.events if e.kind == "refusal"] == REFUSAL_PARTS
    assert [f.code for f in check(ix, a)] == ["refusal"]
    assert compute(ix, a).ttft_ns is not None  # the refusal is what the user sees first
    code, out, _ = run_main("show", recorded.path, "-i", str(recorded.index["refusal"]), "--json",
                            capsys=capsys)
    assert json.loads(out)["result"]["choices"][0]["refusal"] == "".join(REFUSAL_PARTS)
    code, out, _ = run_main("show", recorded.path, "-i", str(recorded.index["refusal"]), "--text",
                            capsys=capsys)
    assert code == 0 and out == ""


# ---------------------------------------------------------------------------
# zstd


@needs_zstd
@pytest.mark.parametrize("name", ["zstd", "zstd-frames"])
def test_zstd_body_is_recorded_as_it_came_and_decoded_for_analysis(recorded: Scenarios, name: str) -> None:
    ix = recorded.interactions[name]
    assert ix.response is not None and ix.response.header("content-encoding") == "zstd"
    assert ix.pieces[0].data.startswith(ZSTD_MAGIC)
    assert ix.response.body != b"".join(ZSTD_EVENTS)  # compressed frames, kept as sent
    body = decoded_body(ix)
    assert body.encoding == "zstd" and body.error is None
    assert body.data == b"".join(ZSTD_EVENTS)
    a = analyze(ix)
    assert a.shape == "openai-chat" and a.text == "".join(ZSTD_WORDS) and a.done
    assert not check(ix, a)
    # Each event was flushed on its own, so each decoded piece keeps its own time.
    assert len(body.pieces) == len(ZSTD_EVENTS)


@needs_zstd
def test_a_zstd_body_cut_short_is_reported_not_raised(recorded: Scenarios) -> None:
    ix = recorded.interactions["zstd"]
    assert ix.response is not None
    cut = replace(ix, response=replace(ix.response, pieces=ix.response.pieces[:3]))
    a = analyze(cut)
    assert a.decode_error == "zstd body ends early (stream cut)"
    assert a.text == "".join(ZSTD_WORDS[:2])


@needs_zstd
def test_openai_sdk_asks_for_zstd_and_reads_every_choice_as_streamtape_does(tmp_path: Path) -> None:
    pytest.importorskip("openai", reason="the openai SDK needs httpx2 (Python 3.12+)")
    import openai

    n2_zstd = zstd_sse(N2, frame_per_event=False)
    up = ScriptedServer({"/v1/chat/completions": n2_zstd})
    out = tmp_path / "sdk.tape"
    with up, recording(out, upstream=up.url) as rec:
        client = openai.OpenAI(base_url=rec.url + "/v1", api_key="sk-test")
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Weather?"}], stream=True, n=2,
            logprobs=True, stream_options={"include_usage": True})
        texts: dict[int, str] = {}
        args: dict[int, str] = {}
        finish: dict[int, str | None] = {}
        for c in stream:
            for ch in c.choices:
                texts[ch.index] = texts.get(ch.index, "") + (ch.delta.content or "")
                for tc in ch.delta.tool_calls or ():
                    args[ch.index] = args.get(ch.index, "") + (tc.function.arguments or "" if tc.function else "")
                if ch.finish_reason:
                    finish[ch.index] = ch.finish_reason
        rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert ix.response is not None and ix.response.header("content-encoding") == "zstd"
    a = analyze(ix)
    assert {c.index: c.text for c in a.choices} == texts
    assert {c.index: "".join(t.arguments for t in c.tool_calls) for c in a.choices if c.tool_calls} == args
    assert {c.index: c.finish.raw if c.finish else None for c in a.choices} == finish
