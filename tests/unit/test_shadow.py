"""The shadow's requests, built without sending them: an OpenAI chat request mapped to Ollama's
``/api/chat`` and back, what Ollama cannot express refused with the reason, the client's
credentials replaced by the shadow's own, and bad ``--shadow`` options. ``streamtape record
--shadow`` in front of real upstreams is tests/system/test_shadow.py."""

from __future__ import annotations

import json

import pytest

import streamtape
from streamtape.shadow import (
    ChatApi,
    Unmappable,
    build_plan,
    ollama_to_openai,
    openai_to_ollama,
    shadow_request,
    translate,
)
from tests.support.recording import run_main


def test_openai_chat_maps_to_ollama_chat_with_tools_images_and_options() -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    doc = {
        "model": "gpt-4o",
        "stream": True,
        "max_completion_tokens": 100,
        "seed": 7,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        "reasoning_effort": "low",
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                         {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}]},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_9", "content": "sunny"},
        ],
    }
    out = openai_to_ollama(doc)
    assert out["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is this?", "images": [png]},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]
    assert out["options"] == {"num_predict": 100, "temperature": 1.0, "top_p": 1.0, "seed": 7}
    assert out["format"] == {"type": "object"} and out["think"] == "low" and out["stream"] is True
    assert out["tools"] == doc["tools"]


def test_ollama_chat_maps_to_openai_chat_and_back_keeps_the_conversation() -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    doc: dict[str, object] = {
        "model": "llama3.1",
        "messages": [
            {"role": "user", "content": "Look", "images": [png]},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "zoom", "arguments": {"x": 2}}}]},
            {"role": "tool", "content": "zoomed", "tool_name": "zoom"},
        ],
        "format": "json",
        "options": {"num_predict": 50, "temperature": 0.1, "top_k": 40},
        "keep_alive": "5m",
    }
    out = ollama_to_openai(doc)
    assert out["stream"] is True and out["stream_options"] == {"include_usage": True}
    assert out["max_tokens"] == 50 and out["temperature"] == 0.1 and "top_k" not in out
    assert out["response_format"] == {"type": "json_object"}
    msgs = out["messages"]
    assert isinstance(msgs, list)
    assert msgs[0]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
    assert msgs[1]["tool_calls"][0]["function"] == {"name": "zoom", "arguments": '{"x": 2}'}
    assert msgs[2]["tool_call_id"] == msgs[1]["tool_calls"][0]["id"]
    back = translate(out, ChatApi.OPENAI_CHAT, ChatApi.OLLAMA_CHAT)
    assert back["messages"] == [
        {"role": "user", "content": "Look", "images": [png]},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "zoom", "arguments": {"x": 2}}}]},
        {"role": "tool", "content": "zoomed", "tool_name": "zoom"},
    ]


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}]}]}, "image given by URL"),
        ({"messages": [], "n": 2}, "one choice only"),
        ({"messages": [], "tools": [{"type": "function"}], "tool_choice": "required"}, "forces a call"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]}, "not valid JSON"),
    ],
)
def test_a_request_ollama_cannot_express_is_refused_with_the_reason(doc: dict[str, object], why: str) -> None:
    with pytest.raises(Unmappable, match=why):
        openai_to_ollama(doc)


def test_a_shadow_request_drops_the_clients_credentials_and_sets_its_own() -> None:
    plan = build_plan(
        upstream="http://a.test:1",
        shadows=["https://b.test/prefix"],
        headers=["b.test:Authorization=Bearer b-key", "b.test:OpenAI-Organization="],
        models=["b.test=m2"],
    )
    (target,) = plan.targets
    req = streamtape.Request(
        "POST",
        "http://a.test:1/v1/chat/completions?api_key=k1&x=1",
        headers=(("Host", "a.test"), ("Authorization", "Bearer a-key"), ("Cookie", "c=1"),
                 ("OpenAI-Organization", "org-a"), ("Content-Type", "application/json"), ("Content-Length", "15")),
        body=b'{"model": "m1"}',
    )
    out = shadow_request(target, req)
    assert out.url == "https://b.test/prefix/v1/chat/completions?x=1"
    assert out.headers == (("Content-Type", "application/json"), ("Authorization", "Bearer b-key"))
    assert json.loads(out.body) == {"model": "m2"}
    assert out.secret_headers == frozenset({"authorization"})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shadow-model", "b=m"], "--shadow-model needs a --shadow"),
        (["--shadow", "http://127.0.0.1:9", "--shadow-header", "nope:X=1"], "no backend 'nope'"),
        (["--shadow", "http://127.0.0.1:9", "--label", "backend=x"], "sets the 'backend' label itself"),
        (["--shadow", "ftp://x"], "expected an http:// or https:// URL"),
        (["--shadow", "http://127.0.0.1:9", "--shadow-path", "127.0.0.1:9:v1=api"], "expected BACKEND:/FROM=/TO"),
        (["--shadow", "http://127.0.0.1:9", "--shadow", "http://127.0.0.1:9/other"], "both named '127.0.0.1:9'"),
    ],
)
def test_bad_shadow_options_give_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main("record", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", *args, capsys=capsys)
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
