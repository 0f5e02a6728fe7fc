"""OpenAI chat <-> Ollama chat: one request body rewritten as the other API's. Pure code.

Used when a shadow speaks another API than the primary and the user says so
with ``--shadow-path B:/v1/chat/completions=/api/chat`` (or the reverse). The
response is never translated: each side is recorded in its own wire format,
and ``diff`` compares them through the normalizers.

What is carried, OpenAI ``/v1/chat/completions`` -> Ollama ``/api/chat``:

- ``model``, ``messages``, ``tools`` (the same ``{"type": "function", ...}`` shape);
- message roles (``developer`` becomes ``system``); content as a string or as
  parts: text parts joined by newlines, ``image_url`` parts given as
  ``data:`` URLs become the message's base64 ``images``;
- an assistant's ``tool_calls`` (arguments: a JSON string becomes an object)
  and its ``reasoning_content`` (Ollama's ``thinking``); a ``tool`` message's
  ``tool_call_id`` becomes the ``tool_name`` of the call it answers;
- ``stream`` (OpenAI's default is false, Ollama's true: always written out);
- ``max_completion_tokens`` / ``max_tokens`` -> ``options.num_predict``;
  ``temperature``, ``top_p`` (absent: OpenAI's default of 1.0 is written, since
  Ollama's model defaults differ), ``seed``, ``stop``, ``frequency_penalty``,
  ``presence_penalty`` -> ``options``;
- ``response_format`` ``json_object`` -> ``format: "json"``, ``json_schema`` ->
  ``format: <schema>``; ``reasoning_effort`` (or ``reasoning.effort``) ->
  ``think`` (``none`` is ``false``); ``tool_choice: "none"`` drops the tools;
  ``logprobs``, ``top_logprobs``.

And Ollama ``/api/chat`` -> OpenAI ``/v1/chat/completions``: the same fields
the other way; ``images`` become ``image_url`` parts with a ``data:`` URL of
the type their bytes show (PNG, JPEG, GIF, WebP); tool calls get ids
(``call_0``, ``call_1``, ...) and each ``tool`` message answers the oldest
unanswered call of its ``tool_name``; ``stream`` defaults to true as in
Ollama, and a streamed request asks for ``stream_options.include_usage`` so
the OpenAI side reports token counts as Ollama's last line does (the
comparison's tokens/s needs them); ``options.num_predict`` -> ``max_tokens``;
a ``think`` level (``"high"``) -> ``reasoning_effort`` (``true``/``false`` name no
level and are left to the server's default).

Left out, since the other API has no such field: OpenAI's ``n`` (more than one
choice is refused), ``logit_bias``, ``user``, ``metadata``, ``store``,
``parallel_tool_calls``, ``service_tier``; Ollama's ``keep_alive`` and the
model options OpenAI lacks (``top_k``, ``min_p``, ``num_ctx``,
``repeat_penalty``, ...). A request that cannot be carried over without
changing what it asks (an image by http URL, a ``tool_choice`` that forces a
call, arguments that are not JSON) raises :class:`Unmappable`, and the shadow
records it as not sent, with the reason.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import cast

JsonObject = dict[str, object]


class ChatApi(StrEnum):
    """The chat APIs a request can be mapped between."""

    OPENAI_CHAT = "openai-chat"
    OLLAMA_CHAT = "ollama-chat"


def api_of_path(path: str) -> ChatApi | None:
    """Which chat API a request path belongs to (``/v1/chat/completions``, ``/api/chat``)."""
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/chat/completions"):
        return ChatApi.OPENAI_CHAT
    if p.endswith("/api/chat"):
        return ChatApi.OLLAMA_CHAT
    return None


class Unmappable(Exception):
    """A request that the other API cannot express without changing what it asks."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def translate(doc: JsonObject, source: ChatApi, target: ChatApi) -> JsonObject:
    """``doc`` (a request body of ``source``) as a request body of ``target``."""
    if source == target:
        return doc
    step = _STEPS[(source, target)]
    return step(doc)


# ---------------------------------------------------------------------------
# OpenAI -> Ollama


def _obj(v: object, what: str) -> JsonObject:
    if not isinstance(v, dict):
        raise Unmappable(f"{what} is not a JSON object")
    return cast(JsonObject, v)


def _list(v: object, what: str) -> list[object]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise Unmappable(f"{what} is not a JSON array")
    return v


def _image_data(url: str) -> str:
    """The base64 payload of a ``data:`` image URL (Ollama takes base64 images only)."""
    if not url.startswith("data:"):
        raise Unmappable("an image given by URL; Ollama takes images only as data (a data: URL)")
    head, sep, data = url.partition(",")
    if not sep or ";base64" not in head:
        raise Unmappable("an image data: URL that is not base64")
    return data


def _openai_content(content: object, where: str) -> tuple[str, list[str]]:
    """A message's content as Ollama's text and images."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    images: list[str] = []
    for part in _list(content, f"{where}.content"):
        p = _obj(part, f"a part of {where}.content")
        kind = p.get("type")
        if kind == "text":
            texts.append(str(p.get("text", "")))
        elif kind == "image_url":
            ref = p.get("image_url")
            url = ref.get("url") if isinstance(ref, dict) else ref
            if not isinstance(url, str):
                raise Unmappable(f"{where}: an image_url part without a URL")
            images.append(_image_data(url))
        else:
            raise Unmappable(f"{where}: a {kind!r} content part has no Ollama equivalent")
    return "\n".join(texts), images


def _arguments_object(raw: object, where: str) -> object:
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        raise Unmappable(f"{where}: tool call arguments are neither a JSON string nor an object")
    try:
        return json.loads(raw)
    except ValueError:
        raise Unmappable(f"{where}: tool call arguments are not valid JSON") from None


def _openai_message(msg: JsonObject, i: int, call_names: Mapping[str, str]) -> JsonObject:
    where = f"messages[{i}]"
    role = str(msg.get("role", ""))
    out: JsonObject = {"role": "system" if role == "developer" else role}
    text, images = _openai_content(msg.get("content"), where)
    out["content"] = text
    if images:
        out["images"] = images
    calls = []
    for tc in _list(msg.get("tool_calls"), f"{where}.tool_calls"):
        fn = _obj(_obj(tc, f"{where}.tool_calls[]").get("function"), f"{where}.tool_calls[].function")
        calls.append({"function": {"name": fn.get("name"), "arguments": _arguments_object(fn.get("arguments"), where)}})
    if calls:
        out["tool_calls"] = calls
    thinking = msg.get("reasoning_content", msg.get("reasoning"))
    if isinstance(thinking, str) and thinking:
        out["thinking"] = thinking
    if role == "tool":
        name = msg.get("name") or call_names.get(str(msg.get("tool_call_id", "")))
        if name:
            out["tool_name"] = name
    return out


_OPENAI_OPTIONS = ("seed", "frequency_penalty", "presence_penalty")


def openai_to_ollama(doc: JsonObject) -> JsonObject:
    """An OpenAI chat completions request as an Ollama ``/api/chat`` request."""
    n = doc.get("n")
    if isinstance(n, int) and n > 1:
        raise Unmappable(f"n={n}: Ollama answers with one choice only")
    messages = [_obj(m, f"messages[{i}]") for i, m in enumerate(_list(doc.get("messages"), "messages"))]
    call_names: dict[str, str] = {}
    for m in messages:
        for tc in _list(m.get("tool_calls"), "tool_calls"):
            if isinstance(tc, dict) and isinstance(fn := tc.get("function"), dict):
                call_names[str(tc.get("id", ""))] = str(fn.get("name", ""))
    out: JsonObject = {
        "model": doc.get("model"),
        "messages": [_openai_message(m, i, call_names) for i, m in enumerate(messages)],
        "stream": bool(doc.get("stream", False)),
    }
    tools = doc.get("tools")
    choice = doc.get("tool_choice")
    if tools and choice not in (None, "auto", "none"):
        raise Unmappable(f"tool_choice {json.dumps(choice)} forces a call; Ollama has no such setting")
    if tools and choice != "none":
        out["tools"] = tools
    options: JsonObject = {}
    limit = doc.get("max_completion_tokens", doc.get("max_tokens"))
    if limit is not None:
        options["num_predict"] = limit
    options["temperature"] = doc["temperature"] if doc.get("temperature") is not None else 1.0
    options["top_p"] = doc["top_p"] if doc.get("top_p") is not None else 1.0
    for key in _OPENAI_OPTIONS:
        if doc.get(key) is not None:
            options[key] = doc[key]
    stop = doc.get("stop")
    if isinstance(stop, str):
        options["stop"] = [stop]
    elif isinstance(stop, list):
        options["stop"] = stop
    out["options"] = options
    fmt = doc.get("response_format")
    if isinstance(fmt, dict):
        kind = fmt.get("type")
        if kind == "json_object":
            out["format"] = "json"
        elif kind == "json_schema":
            schema = fmt.get("json_schema")
            if isinstance(schema, dict) and "schema" in schema:
                out["format"] = schema["schema"]
    reasoning = doc.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else doc.get("reasoning_effort")
    if isinstance(effort, str) and effort:
        out["think"] = False if effort == "none" else effort
    for key in ("logprobs", "top_logprobs"):
        if doc.get(key) is not None:
            out[key] = doc[key]
    return out


# ---------------------------------------------------------------------------
# Ollama -> OpenAI

_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _image_type(data: str) -> str:
    try:
        head = base64.b64decode(data[:64] + "=" * (-len(data[:64]) % 4), validate=False)
    except (binascii.Error, ValueError):
        raise Unmappable("an image that is not base64") from None
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    raise Unmappable("an image of a type OpenAI does not take (not PNG, JPEG, GIF or WebP)")


_OLLAMA_OPTIONS = ("temperature", "top_p", "seed", "frequency_penalty", "presence_penalty", "stop")


def ollama_to_openai(doc: JsonObject) -> JsonObject:
    """An Ollama ``/api/chat`` request as an OpenAI chat completions request."""
    messages: list[JsonObject] = []
    open_calls: list[tuple[str, str]] = []  # (id, name), oldest first
    counter = 0
    for i, raw in enumerate(_list(doc.get("messages"), "messages")):
        where = f"messages[{i}]"
        m = _obj(raw, where)
        role = str(m.get("role", ""))
        out: JsonObject = {"role": role}
        text = m.get("content")
        images = [str(x) for x in _list(m.get("images"), f"{where}.images")]
        if images:
            parts: list[JsonObject] = [{"type": "text", "text": str(text)}] if text else []
            parts += [
                {"type": "image_url", "image_url": {"url": f"data:{_image_type(d)};base64,{d}"}}
                for d in images
            ]
            out["content"] = parts
        else:
            out["content"] = "" if text is None else text
        calls = []
        for tc in _list(m.get("tool_calls"), f"{where}.tool_calls"):
            fn = _obj(_obj(tc, f"{where}.tool_calls[]").get("function"), f"{where}.tool_calls[].function")
            call_id = f"call_{counter}"
            counter += 1
            name = str(fn.get("name", ""))
            args = fn.get("arguments", {})
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)},
                }
            )
            open_calls.append((call_id, name))
        if calls:
            out["tool_calls"] = calls
            if not text:
                out["content"] = None
        if role == "tool":
            answers = m.get("tool_name")
            match = next((c for c in open_calls if answers is None or c[1] == answers), None)
            if match is None:
                raise Unmappable(f"{where}: a tool result that answers no earlier tool call")
            open_calls.remove(match)
            out["tool_call_id"] = match[0]
        messages.append(out)
    stream = bool(doc.get("stream", True))
    result: JsonObject = {"model": doc.get("model"), "messages": messages, "stream": stream}
    if stream:
        result["stream_options"] = {"include_usage": True}
    if doc.get("tools"):
        result["tools"] = doc["tools"]
    options = doc.get("options")
    if isinstance(options, dict):
        limit = options.get("num_predict")
        if isinstance(limit, int) and limit >= 0:  # -1 and -2 mean "no limit" / "fill the context"
            result["max_tokens"] = limit
        for key in _OLLAMA_OPTIONS:
            if options.get(key) is not None:
                result[key] = options[key]
    fmt = doc.get("format")
    if fmt == "json":
        result["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        result["response_format"] = {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt}}
    think = doc.get("think")
    if isinstance(think, str) and think:  # true/false name no level: the server's default stays
        result["reasoning_effort"] = think
    for key in ("logprobs", "top_logprobs"):
        if doc.get(key) is not None:
            result[key] = doc[key]
    return result


_STEPS: dict[tuple[ChatApi, ChatApi], Callable[[JsonObject], JsonObject]] = {
    (ChatApi.OPENAI_CHAT, ChatApi.OLLAMA_CHAT): openai_to_ollama,
    (ChatApi.OLLAMA_CHAT, ChatApi.OPENAI_CHAT): ollama_to_openai,
}

__all__ = [
    "ChatApi",
    "Unmappable",
    "api_of_path",
    "ollama_to_openai",
    "openai_to_ollama",
    "translate",
]
