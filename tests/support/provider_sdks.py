"""The hosted providers' official SDKs, each driven through one call and reduced to what it assembled.

:func:`call` runs the SDK call for one of :func:`tests.support.providers.streams`
against a :class:`Target`: a base URL (the scripted upstream, ``streamtape record``
or ``streamtape serve``) with the profile header, or an in-process replay
transport (``transport``: the SDKs built on httpx or httpx2). The SDKs are the
real ones, unchanged, configured the way their docs say to reach another endpoint:

- google-genai: ``genai.Client(api_key=..., http_options=HttpOptions(base_url=...,
  api_version="v1beta", headers=..., httpx_client=...))``, for ``generate_content_stream``
  and ``interactions.create(..., stream=True)`` alike;
- boto3: ``boto3.client("bedrock-runtime", endpoint_url=..., region_name=...,
  aws_access_key_id=..., aws_secret_access_key=..., aws_session_token=...)`` (a header
  is added by a ``before-send`` hook, after signing);
- cohere: ``cohere.ClientV2(api_key=..., base_url=..., httpx_client=...)``;
- mistralai: ``Mistral(api_key=..., server_url=..., client=...)``;
- openai: ``openai.AzureOpenAI(azure_endpoint=..., api_key=..., api_version=...,
  http_client=...)``;
- replicate: ``replicate.Client(api_token=..., base_url=..., headers=..., transport=...)``,
  then ``client.stream(model, input=...)``: it creates the prediction and follows its
  absolute ``urls.stream``. ``proxy`` (the recorder in regular mode) is how a recording
  catches that second request: the URL names the API's host, not a reverse proxy's.
- ibm-watsonx-ai: ``Credentials(url=..., api_key=..., platform_url=..., auth_url=...)``,
  ``APIClient(credentials, project_id=..., httpx_client=...)``, ``ModelInference(model_id=...,
  api_client=...)``: https URLs only, so through a proxy (``proxy``, ``ca``) or a transport.

The Gemini JSON array has no SDK that reads it streamed: it is read with httpx
and ``json``, as the REST docs show.
"""

from __future__ import annotations

import json
import ssl
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import boto3  # type: ignore[import-untyped]
import httpx

from streamtape.wire import PROFILE_HEADER
from tests.support import providers as P

PROMPT = "Say hello"
GEMINI_KEY = "AIzaSyTEST-not-a-real-key"
AWS = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
       "aws_session_token": "FwoGZXIvYXdzEJr//////////session-token-example"}
COHERE_KEY = "co-test-key"
MISTRAL_KEY = "mistral-test-key"
AZURE_KEY = "azure-test-key"
OPENAI_KEY = "sk-test-assistants-key"
REPLICATE_TOKEN = "r8_TEST-not-a-real-token"
WATSONX_KEY = "wx-test-api-key"

SECRETS = (GEMINI_KEY, AWS["aws_session_token"], AWS["aws_secret_access_key"], COHERE_KEY, MISTRAL_KEY, AZURE_KEY, OPENAI_KEY,
           REPLICATE_TOKEN, WATSONX_KEY)
"""What must never reach a cassette (:data:`WATSONX_KEY` goes in the IAM token call's form body,
``apikey=...``, which redaction blanks)."""

TOOLS_COHERE = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                   "required": ["city"]}}}]


@dataclass
class Answer:
    """What an SDK assembled: text, reasoning (thoughts / tool plan), tool calls, finish."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)
    finish: str | None = None


@dataclass
class Target:
    """Where an SDK's requests go: ``base`` (a URL) with ``profile`` in the profile header,
    or, with ``transport`` set, an in-process replay transport (any base)."""

    base: str = "http://llm.test"
    profile: str | None = None
    transport: Any = None
    """A :class:`streamtape.ReplayTransport` (httpx and httpx2 clients alike), or None."""
    proxy: str | None = None
    """An HTTP proxy every request goes through (``streamtape record --mode regular``), or None."""
    ca: str | None = None
    """A CA file the client trusts (the proxy's, for HTTPS through it), or None."""

    @property
    def headers(self) -> dict[str, str]:
        return {PROFILE_HEADER: self.profile} if self.profile and self.transport is None else {}

    def httpx2_client(self) -> Any:
        import httpx2

        return httpx2.Client(transport=self.transport, timeout=30) if self.transport else None


def expected(stream: P.Stream) -> Answer:
    """The answer an SDK must assemble from ``stream``, from its script."""
    return Answer(stream.text, stream.reasoning, [(n, a) for n, a in stream.tool_calls], stream.finish)


# --------------------------------------------------------------------------
# One function per stream


def gemini(t: Target, model: str) -> Answer:
    from google import genai
    from google.genai import types

    opts = types.HttpOptions(base_url=t.base, api_version="v1beta", headers=t.headers, timeout=30_000,
                             retry_options=types.HttpRetryOptions(attempts=1), httpx_client=t.httpx2_client())
    client = genai.Client(api_key=GEMINI_KEY, http_options=opts)
    ans = Answer()
    for chunk in client.models.generate_content_stream(model=model, contents=PROMPT):
        for cand in chunk.candidates or []:
            for part in (cand.content.parts if cand.content else None) or []:
                if part.thought:
                    ans.reasoning += part.text or ""
                else:
                    ans.text += part.text or ""
            if cand.finish_reason:
                ans.finish = cand.finish_reason.value
    return ans


def interactions_stream(t: Target) -> Iterator[Any]:
    """The events google-genai's ``client.interactions.create(..., stream=True)`` yields
    (a generator, so the client lives as long as its stream: a client collected closes
    its connections)."""
    from google import genai
    from google.genai import types

    opts = types.HttpOptions(base_url=t.base, api_version="v1beta", headers=t.headers, timeout=30_000,
                             retry_options=types.HttpRetryOptions(attempts=1), httpx_client=t.httpx2_client())
    client = genai.Client(api_key=GEMINI_KEY, http_options=opts)
    events: Any = client.interactions.create(model=P.INTERACTIONS_MODEL, input=PROMPT, stream=True)
    yield from events


def gemini_interactions(t: Target) -> Answer:
    """google-genai's Interactions client: the events it yields, typed by ``event_type``,
    assembled the way its streaming guide reads them (a delta's meaning is its step's)."""
    ans = Answer()
    steps: dict[int, str] = {}
    calls: dict[int, list[Any]] = {}
    for ev in interactions_stream(t):  # Any: the event union's members are told apart by .event_type
        if ev.event_type == "step.start":
            steps[ev.index] = ev.step.type
            if ev.step.type == "function_call":
                calls[ev.index] = [ev.step.name, json.dumps(ev.step.arguments) if ev.step.arguments else ""]
        elif ev.event_type == "step.delta":
            d: Any = ev.delta
            if d.type == "text":
                if steps.get(ev.index) == "thought":
                    ans.reasoning += d.text
                else:
                    ans.text += d.text
            elif d.type == "thought_summary" and d.content is not None:
                ans.reasoning += getattr(d.content, "text", "") or ""
            elif d.type == "arguments_delta":
                calls[ev.index][1] += d.arguments or ""
        elif ev.event_type == "interaction.completed":
            ans.finish = ev.interaction.status
    ans.tool_calls = [(name, json.loads(args)) for _, (name, args) in sorted(calls.items())]
    return ans


def gemini_array(t: Target) -> Answer:
    url = f"{t.base}/v1beta/models/{P.ARRAY_MODEL}:streamGenerateContent"
    with httpx.Client(transport=t.transport, timeout=30) as client:
        r = client.post(url, json={"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]},
                        headers={"x-goog-api-key": GEMINI_KEY, **t.headers})
        r.raise_for_status()
        ans = Answer()
        for chunk in json.loads(r.content):
            for cand in chunk.get("candidates", []):
                for part in cand.get("content", {}).get("parts", []):
                    if part.get("thought"):
                        ans.reasoning += part.get("text", "")
                    else:
                        ans.text += part.get("text", "")
                ans.finish = cand.get("finishReason") or ans.finish
    return ans


def _bedrock(t: Target) -> Any:
    from botocore.config import Config  # type: ignore[import-untyped]

    client = boto3.client("bedrock-runtime", endpoint_url=t.base, region_name="us-east-1",
                          config=Config(retries={"max_attempts": 1}, read_timeout=30), **AWS)
    headers = t.headers

    def add_profile(request: Any, **_: Any) -> None:
        request.headers.update(headers)

    if headers:
        client.meta.events.register("before-send.bedrock-runtime.*", add_profile)
    return client


def bedrock_converse(t: Target, model: str = P.BEDROCK_MODEL) -> Answer:
    client = _bedrock(t)
    r = client.converse_stream(modelId=model, messages=[{"role": "user", "content": [{"text": PROMPT}]}])
    ans = Answer()
    tools: dict[int, list[str]] = {}
    for ev in r["stream"]:
        if "contentBlockStart" in ev:
            start = ev["contentBlockStart"]
            tools[start["contentBlockIndex"]] = [start["start"]["toolUse"]["name"], ""]
        elif "contentBlockDelta" in ev:
            d = ev["contentBlockDelta"]
            if "text" in d["delta"]:
                ans.text += d["delta"]["text"]
            elif "toolUse" in d["delta"]:
                tools[d["contentBlockIndex"]][1] += d["delta"]["toolUse"]["input"]
        elif "messageStop" in ev:
            ans.finish = ev["messageStop"]["stopReason"]
    ans.tool_calls = [(name, json.loads(args)) for _, (name, args) in sorted(tools.items())]
    return ans


def bedrock_invoke(t: Target) -> Answer:
    client = _bedrock(t)
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 256,
            "messages": [{"role": "user", "content": PROMPT}]}
    r = client.invoke_model_with_response_stream(modelId=P.BEDROCK_MODEL, body=json.dumps(body))
    ans = Answer()
    for ev in r["body"]:
        e = json.loads(ev["chunk"]["bytes"])
        if e["type"] == "content_block_delta":
            ans.text += e["delta"]["text"]
        elif e["type"] == "message_delta":
            ans.finish = e["delta"]["stop_reason"]
    return ans


def cohere_chat(t: Target) -> Answer:
    import cohere

    http = httpx.Client(transport=t.transport, headers=t.headers, timeout=30)
    client = cohere.ClientV2(api_key=COHERE_KEY, base_url=t.base, httpx_client=http, max_retries=0)
    ans = Answer()
    args: dict[int, list[str]] = {}
    messages: Any = [{"role": "user", "content": "Weather in Zürich?"}]
    events: Any = client.chat_stream(model=P.COHERE_MODEL, tools=cast(Any, TOOLS_COHERE), messages=messages)
    for ev in events:  # Any: the event union's members are told apart by .type
        if ev.type == "content-delta":
            ans.text += ev.delta.message.content.text
        elif ev.type == "tool-plan-delta":
            ans.reasoning += ev.delta.message.tool_plan
        elif ev.type == "tool-call-start":
            fn = ev.delta.message.tool_calls.function
            args[ev.index] = [fn.name, fn.arguments or ""]
        elif ev.type == "tool-call-delta":
            args[ev.index][1] += ev.delta.message.tool_calls.function.arguments
        elif ev.type == "message-end":
            ans.finish = ev.delta.finish_reason
    ans.tool_calls = [(name, json.loads(a)) for _, (name, a) in sorted(args.items())]
    return ans


def mistral_chat(t: Target) -> Answer:
    from mistralai.client import Mistral

    client = Mistral(api_key=MISTRAL_KEY, server_url=t.base, client=t.httpx2_client(), timeout_ms=30_000)
    ans = Answer()
    messages: Any = [{"role": "user", "content": PROMPT}]
    for ev in client.chat.stream(model=P.MISTRAL_MODEL, messages=messages, http_headers=t.headers):
        for ch in ev.data.choices:
            content = ch.delta.content
            ans.text += content if isinstance(content, str) else ""
            ans.finish = ch.finish_reason or ans.finish
    return ans


def azure_chat(t: Target) -> Answer:
    import openai

    client = openai.AzureOpenAI(azure_endpoint=t.base, api_key=AZURE_KEY, api_version=P.AZURE_API_VERSION,
                                http_client=t.httpx2_client(), default_headers=t.headers, max_retries=0, timeout=30)
    ans = Answer()
    for chunk in client.chat.completions.create(model=P.AZURE_DEPLOYMENT, stream=True,
                                                messages=[{"role": "user", "content": PROMPT}]):
        for ch in chunk.choices:
            ans.text += ch.delta.content or "" if ch.delta else ""
            ans.finish = ch.finish_reason or ans.finish
    return ans


def assistants_run(t: Target) -> Answer:
    import openai

    client = openai.OpenAI(base_url=f"{t.base}/v1", api_key=OPENAI_KEY, http_client=t.httpx2_client(),
                           default_headers=t.headers, max_retries=0, timeout=30)
    ans = Answer()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the SDK marks Assistants deprecated
        manager = client.beta.threads.runs.stream(thread_id=P.ASSISTANTS_THREAD,
                                                  assistant_id=P.ASSISTANTS_ASSISTANT)
    with manager as stream:
        for event in stream:
            data: Any = event.data
            if event.event == "thread.message.delta":
                for part in data.delta.content or ():
                    if part.type == "text" and part.text is not None:
                        ans.text += part.text.value or ""
            elif event.event.startswith("thread.run.") and not event.event.startswith("thread.run.step"):
                ans.finish = data.status
    return ans


def replicate_stream(t: Target) -> Answer:
    from replicate.client import Client

    client = Client(api_token=REPLICATE_TOKEN, base_url=t.base, headers=dict(t.headers),
                              transport=t.transport, proxy=t.proxy)
    ans = Answer()
    for ev in client.stream(P.REPLICATE_MODEL, input={"prompt": PROMPT}):
        if ev.event.value == "output":
            ans.text += str(ev)
        elif ev.event.value == "done":
            ans.finish = ev.event.value
    return ans


def watsonx_stream(t: Target) -> Answer:
    """``ModelInference.generate_text_stream`` with ``raw_response=True`` (the results, with the
    stop reason). The SDK takes https URLs only; ``auth_url`` and ``platform_url`` point the
    IAM token and project calls at ``t.base`` too, and its ``httpx_client`` carries the proxy,
    the CA, the profile header or the replay transport."""
    from ibm_watsonx_ai import APIClient, Credentials
    from ibm_watsonx_ai.foundation_models import ModelInference

    base = t.base if t.transport is None else "https://watsonx.test"  # any https URL: no socket
    creds = Credentials(url=base, api_key=WATSONX_KEY, platform_url=base, auth_url=f"{base}/identity/token")
    verify = ssl.create_default_context(cafile=t.ca) if t.ca else True
    http = httpx.Client(transport=t.transport, headers=t.headers, timeout=30, verify=verify, proxy=t.proxy)
    client = APIClient(creds, project_id=P.WATSONX_PROJECT, httpx_client=http)
    model = ModelInference(model_id=P.WATSONX_MODEL, api_client=client, max_retries=0)
    ans = Answer()
    for doc in model.generate_text_stream(prompt=PROMPT, raw_response=True):
        for r in doc["results"]:
            ans.text += r.get("generated_text", "")
            if r.get("stop_reason") not in (None, "not_finished"):
                ans.finish = r["stop_reason"]
    return ans


CALLS = {
    "gemini-sse": lambda t: gemini(t, P.GEMINI_MODEL),
    "gemini-crlf": lambda t: gemini(t, P.VERTEX_MODEL),
    "gemini-array": gemini_array,
    "gemini-interactions": gemini_interactions,
    "bedrock-converse": bedrock_converse,
    "bedrock-throttled": lambda t: bedrock_converse(t, P.BEDROCK_THROTTLED),
    "bedrock-invoke": bedrock_invoke,
    "cohere-chat": cohere_chat,
    "mistral-chat": mistral_chat,
    "azure-chat": azure_chat,
    "assistants-run": assistants_run,
    "replicate-stream": replicate_stream,
    "watsonx-stream": watsonx_stream,
}
"""Each stream's SDK call, by stream name."""

HTTPX_SDKS = ("gemini-sse", "gemini-crlf", "gemini-array", "gemini-interactions", "cohere-chat", "mistral-chat",
              "azure-chat", "assistants-run", "replicate-stream", "watsonx-stream")
"""The streams whose client talks through httpx or httpx2 (boto3 does not: botocore's urllib3)."""

HTTPX2_STREAMS = ("gemini-sse", "gemini-crlf", "gemini-interactions", "mistral-chat", "azure-chat", "assistants-run")
"""The streams whose SDK is built on httpx2 (installed on Python 3.12+ only)."""

HTTPS_ONLY = ("watsonx-stream",)
"""The streams whose SDK takes https URLs only: scripted on a TLS upstream, recorded through the
recorder as a regular proxy (its CA trusted), replayed by ``streamtape serve --proxy``."""

REGULAR_MODE = ("replicate-stream", *HTTPS_ONLY)
"""The streams recorded through the recorder as a regular proxy (:attr:`Target.proxy`): their
SDK follows an absolute URL from a first response, which a reverse proxy never sees."""


def call(name: str, t: Target) -> Answer:
    """Run stream ``name``'s SDK call against ``t``; what it assembled."""
    fn: Any = CALLS[name]
    ans: Answer = fn(t)
    return ans
