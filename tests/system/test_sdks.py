"""The official client SDKs against replayed streams: the matrix of issue 4.

For ``faithful`` and every profile in :data:`streamtape.profiles.ADVERSARIAL`,
over the in-process transport (httpx2 for openai/anthropic, httpx for ollama,
the requests adapter for huggingface_hub) and over the replay server on
127.0.0.1, each SDK's assembled text and tool-call arguments must equal what
the recording says (read independently with ``json`` in ``fixtures_sdk``).

For every fault (cut, reset, cut at an event, error event, dropped
``[DONE]``, status 500 / 429) the SDK must raise or report the cut, and
never hand back a shorter answer as finished.

Timing: the in-process runs use a virtual clock (``realtime=False``) and the
server runs use the profile's own latency (instant for the adversarial set,
the recorded ~0.1-0.3 s for ``faithful``); two tests replay in real time
in-process.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ollama
import pytest
import requests
import text_generation
from huggingface_hub import AsyncInferenceClient, InferenceClient, configure_http_backend

import streamtape
from streamtape.profiles import ADVERSARIAL
from streamtape.serve import ReplayServer
from tests.support import fixtures_sdk as F

# The openai and anthropic SDKs are built on httpx2, which the test extra leaves out on
# Python 3.11: their cases carry the httpx2 marker and skip there with the reason (and how to
# run them: tests/conftest.py); the ollama, huggingface_hub and text-generation cases run.
if TYPE_CHECKING:
    import httpx2

    anthropic: Any  # driven with plain dicts, as the SDKs' users do
    openai: Any
else:
    try:
        import anthropic
        import httpx2
        import openai
    except ImportError:
        anthropic = httpx2 = openai = None

# text-generation calls pydantic's deprecated .dict(): not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:The `dict` method is deprecated:DeprecationWarning")

RECORDINGS = F.all_recordings()
BY_SOURCE = {ix.labels["source"]: ix for ix in RECORDINGS}
OPENAI_CHAT, OPENAI_TOOLS, ANTHROPIC_TEXT, ANTHROPIC_TOOLS, OLLAMA_CHAT, TGI_HF, TGI_TG = RECORDINGS

PROFILES = {"faithful": "faithful", **{f"adversarial:{k}": v for k, v in ADVERSARIAL.items()}}


@dataclass
class Answer:
    """What an SDK assembled: text, tool-call arguments by index, and its finish signal."""

    text: str = ""
    tool_args: dict[int, str] = field(default_factory=dict)
    tool_input: dict[int, Any] = field(default_factory=dict)  # parsed by the SDK itself
    finish: str | None = None


# --------------------------------------------------------------------------
# Drivers: where the SDK's requests go


CRLF = [F.crlf(ix) for ix in RECORDINGS]
CLOSE_DELIMITED = [F.close_delimited(ix) for ix in RECORDINGS]
UPSTREAM_CLOSED = [F.upstream_closed(ix) for ix in RECORDINGS]
SETS = {"lf": RECORDINGS, "crlf": CRLF, "close": CLOSE_DELIMITED, "upstream-closed": UPSTREAM_CLOSED}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ReplayServer]]:
    """One replay server per recording set, started on first use."""
    started: dict[str, ReplayServer] = {}

    class Lazy(dict[str, ReplayServer]):
        def __missing__(self, key: str) -> ReplayServer:
            srv = ReplayServer(SETS[key], profile="faithful", log=lambda line: None)
            srv.__enter__()
            started[key] = srv
            self[key] = srv
            return srv

    yield Lazy()
    for srv in started.values():
        srv.__exit__(None, None, None)


@dataclass
class Wiring:
    """How to point each SDK at one driver under one profile."""

    kind: str  # "transport" | "server"
    profile: str
    server_url: str = ""
    realtime: bool = False
    recordings: list[Any] = field(default_factory=lambda: RECORDINGS)
    timeout: float = 30.0  # the SDK's read timeout

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Streamtape-Profile": self.profile} if self.kind == "server" else {}

    def base(self, default: str) -> str:
        if self.kind == "transport":
            return default
        return self.server_url + default.removeprefix("http://llm.test")

    def httpx2_client(self) -> httpx2.Client:
        if self.kind == "transport":
            t = streamtape.ReplayTransport(self.recordings, self.profile, realtime=self.realtime)
            return httpx2.Client(transport=t)
        return httpx2.Client()

    def httpx2_async_client(self) -> httpx2.AsyncClient:
        if self.kind == "transport":
            t = streamtape.AsyncReplayTransport(self.recordings, self.profile, realtime=self.realtime)
            return httpx2.AsyncClient(transport=t)
        return httpx2.AsyncClient()

    def ollama_kwargs(self) -> dict[str, Any]:
        if self.kind == "transport":
            return {
                "transport": streamtape.ReplayTransport(self.recordings, self.profile, realtime=self.realtime),
                "timeout": self.timeout,
            }
        return {"headers": self.headers, "timeout": self.timeout}

    def ollama_async_kwargs(self) -> dict[str, Any]:
        if self.kind == "transport":
            return {
                "transport": streamtape.AsyncReplayTransport(self.recordings, self.profile, realtime=self.realtime),
                "timeout": self.timeout,
            }
        return {"headers": self.headers, "timeout": self.timeout}


# --------------------------------------------------------------------------
# One function per SDK call: run it, return what it assembled


def openai_text(w: Wiring) -> Answer:
    client = openai.OpenAI(
        api_key="sk-test", base_url=w.base(F.OPENAI_BASE), http_client=w.httpx2_client(),
        default_headers=w.headers, max_retries=0, timeout=w.timeout,
    )
    ans = Answer()
    for chunk in client.chat.completions.create(model="tiny-llama", messages=F.PROMPT, stream=True):
        for ch in chunk.choices:
            ans.text += ch.delta.content or ""
            ans.finish = ch.finish_reason or ans.finish
    return ans


def openai_text_async(w: Wiring) -> Answer:
    async def main() -> Answer:
        client = openai.AsyncOpenAI(
            api_key="sk-test", base_url=w.base(F.OPENAI_BASE), http_client=w.httpx2_async_client(),
            default_headers=w.headers, max_retries=0, timeout=w.timeout,
        )
        ans = Answer()
        stream = await client.chat.completions.create(model="tiny-llama", messages=F.PROMPT, stream=True)
        async for chunk in stream:
            for ch in chunk.choices:
                ans.text += ch.delta.content or ""
                ans.finish = ch.finish_reason or ans.finish
        await client.close()
        return ans

    return asyncio.run(main())


def openai_tools(w: Wiring) -> Answer:
    """Tool calls through the SDK's own stream helper, which joins argument fragments."""
    client = openai.OpenAI(
        api_key="sk-test", base_url=w.base(F.OPENAI_BASE), http_client=w.httpx2_client(),
        default_headers=w.headers, max_retries=0, timeout=w.timeout,
    )
    with client.chat.completions.stream(
        model="tiny-llama", messages=F.TOOL_PROMPT, tools=F.WEATHER_TOOLS
    ) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    ans = Answer(text=choice.message.content or "", finish=choice.finish_reason)
    for n, tc in enumerate(choice.message.tool_calls or []):
        ans.tool_args[n] = tc.function.arguments
    return ans


def anthropic_messages(w: Wiring, tools: bool) -> Answer:
    client = anthropic.Anthropic(
        api_key="sk-test", base_url=w.base(F.ANTHROPIC_BASE), http_client=w.httpx2_client(),
        default_headers=w.headers, max_retries=0, timeout=w.timeout,
    )
    kwargs: dict[str, Any] = {"model": "tiny-llama", "max_tokens": 64}
    if tools:
        kwargs.update(messages=F.TOOL_PROMPT, tools=F.ANTHROPIC_TOOLS)
    else:
        kwargs.update(messages=F.PROMPT)
    with client.messages.stream(**kwargs) as stream:
        msg = stream.get_final_message()
    ans = Answer(finish=msg.stop_reason)
    for n, block in enumerate(msg.content):
        if block.type == "text":
            ans.text += block.text
        elif block.type == "tool_use":
            ans.tool_input[n] = block.input
    return ans


def anthropic_text(w: Wiring) -> Answer:
    return anthropic_messages(w, tools=False)


def anthropic_text_async(w: Wiring) -> Answer:
    async def main() -> Answer:
        client = anthropic.AsyncAnthropic(
            api_key="sk-test", base_url=w.base(F.ANTHROPIC_BASE), http_client=w.httpx2_async_client(),
            default_headers=w.headers, max_retries=0, timeout=w.timeout,
        )
        async with client.messages.stream(model="tiny-llama", max_tokens=64, messages=F.PROMPT) as stream:
            msg = await stream.get_final_message()
        await client.close()
        ans = Answer(finish=msg.stop_reason)
        ans.text = "".join(b.text for b in msg.content if b.type == "text")
        return ans

    return asyncio.run(main())


def anthropic_tools(w: Wiring) -> Answer:
    return anthropic_messages(w, tools=True)


def ollama_chat(w: Wiring) -> Answer:
    client = ollama.Client(host=w.base(F.OLLAMA_BASE), **w.ollama_kwargs())
    ans = Answer()
    for part in client.chat(model="llama3.1", messages=F.PROMPT, stream=True):
        ans.text += part.message.content or ""
        if part.done:
            ans.finish = part.done_reason
    return ans


def ollama_chat_async(w: Wiring) -> Answer:
    async def main() -> Answer:
        client = ollama.AsyncClient(host=w.base(F.OLLAMA_BASE), **w.ollama_async_kwargs())
        ans = Answer()
        async for part in await client.chat(model="llama3.1", messages=F.PROMPT, stream=True):
            ans.text += part.message.content or ""
            if part.done:
                ans.finish = part.done_reason
        return ans

    return asyncio.run(main())


def _hf_session_factory(w: Wiring) -> Callable[[], requests.Session]:
    def factory() -> requests.Session:
        s = requests.Session()
        if w.kind == "transport":
            adapter = streamtape.ReplayAdapter(w.recordings, w.profile, realtime=w.realtime)
            s.mount("http://", adapter)
            s.mount("https://", adapter)
        return s

    return factory


def hf_text_generation(w: Wiring) -> Answer:
    """huggingface_hub InferenceClient against TGI /generate_stream (requests underneath)."""
    configure_http_backend(backend_factory=_hf_session_factory(w))
    try:
        client = InferenceClient(model=w.base(F.TGI_URL), headers=w.headers, timeout=w.timeout)
        ans = Answer()
        for out in client.text_generation(F.TGI_PROMPT, max_new_tokens=20, stream=True, details=True):
            if not out.token.special:
                ans.text += out.token.text
            if out.details is not None:
                ans.finish = out.details.finish_reason
                assert out.generated_text == ans.text
        return ans
    finally:
        configure_http_backend()


def text_generation_stream(w: Wiring) -> Answer:
    """text-generation's Client (module-level requests.post: no session to mount on, server only)."""
    client = text_generation.Client(w.base(F.TGI_URL), headers=w.headers, timeout=w.timeout)
    ans = Answer()
    for resp in client.generate_stream(F.TGI_PROMPT, max_new_tokens=20):
        if not resp.token.special:
            ans.text += resp.token.text
        if resp.details is not None:
            ans.finish = resp.details.finish_reason
            assert resp.generated_text == ans.text
    return ans


def hf_text_generation_async(w: Wiring) -> Answer:
    """huggingface_hub AsyncInferenceClient (aiohttp underneath: over the server only)."""

    async def main() -> Answer:
        client = AsyncInferenceClient(model=w.base(F.TGI_URL), headers=w.headers, timeout=w.timeout)
        ans = Answer()
        stream = await client.text_generation(F.TGI_PROMPT, max_new_tokens=20, stream=True, details=True)
        async for out in stream:
            if not out.token.special:
                ans.text += out.token.text
            if out.details is not None:
                ans.finish = out.details.finish_reason
                assert out.generated_text == ans.text
        await client.close()
        return ans

    return asyncio.run(main())


def text_generation_stream_async(w: Wiring) -> Answer:
    """text-generation's AsyncClient (aiohttp; over the server only)."""

    async def main() -> Answer:
        client = text_generation.AsyncClient(w.base(F.TGI_URL), headers=w.headers, timeout=int(max(1, w.timeout)))
        ans = Answer()
        async for resp in client.generate_stream(F.TGI_PROMPT, max_new_tokens=20):
            if not resp.token.special:
                ans.text += resp.token.text
            if resp.details is not None:
                ans.finish = resp.details.finish_reason
                assert resp.generated_text == ans.text
        return ans

    return asyncio.run(main())


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[Wiring], Answer]
    recording: Any
    drivers: tuple[str, ...] = ("transport", "server")
    set: str = "lf"

    @property
    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        """The httpx2 marker for the SDKs built on httpx2 (skipped where it is not installed)."""
        return (pytest.mark.httpx2,) if self.name.startswith(("openai", "anthropic")) else ()


CASES = [
    Case("openai-sync", openai_text, OPENAI_CHAT),
    Case("openai-async", openai_text_async, OPENAI_CHAT),
    Case("openai-tools", openai_tools, OPENAI_TOOLS),
    Case("anthropic-text", anthropic_text, ANTHROPIC_TEXT),
    Case("anthropic-tools", anthropic_tools, ANTHROPIC_TOOLS),
    Case("anthropic-async", anthropic_text_async, ANTHROPIC_TEXT),
    Case("ollama-sync", ollama_chat, OLLAMA_CHAT),
    Case("ollama-async", ollama_chat_async, OLLAMA_CHAT),
    Case("hf-inference-client", hf_text_generation, TGI_HF),
    Case("text-generation", text_generation_stream, TGI_TG, drivers=("server",)),
    Case("hf-async-inference-client", hf_text_generation_async, TGI_HF, drivers=("server",)),
    Case("text-generation-async", text_generation_stream_async, TGI_TG, drivers=("server",)),
    # The same streams with CRLF line endings (crlf-split then cuts between CR and LF).
    Case("openai-sync-crlf", openai_text, CRLF[0], set="crlf"),
    Case("openai-tools-crlf", openai_tools, CRLF[1], set="crlf"),
    Case("anthropic-text-crlf", anthropic_text, CRLF[2], set="crlf"),
    Case("hf-inference-client-crlf", hf_text_generation, CRLF[5], set="crlf"),
]


def assert_full_answer(ans: Answer, recording: Any) -> None:
    exp = F.expected(recording)
    assert ans.text == exp.text
    assert ans.finish == exp.finish
    if exp.tool_args:
        if ans.tool_input:  # anthropic: the SDK parses the joined partial_json itself
            assert {k: json.dumps(v, ensure_ascii=False) for k, v in ans.tool_input.items()} == {
                k: json.dumps(json.loads(v), ensure_ascii=False) for k, v in exp.tool_args.items()
            }
        else:
            assert ans.tool_args == exp.tool_args
    for i, args in exp.tool_args.items():
        json.loads(args)  # the recording's own arguments are whole JSON
        assert i in ans.tool_args or i in ans.tool_input


def _wiring(case: Case, driver: str, profile: str, request: pytest.FixtureRequest, set_: str = "") -> Wiring:
    set_ = set_ or case.set
    url = request.getfixturevalue("servers")[set_].url if driver == "server" else ""
    return Wiring(driver, profile, server_url=url, recordings=SETS[set_])


def _matrix() -> list[Any]:
    out = []
    for case in CASES:
        for driver in case.drivers:
            for pname, ptext in PROFILES.items():
                out.append(pytest.param(case, driver, ptext, id=f"{case.name}-{driver}-{pname}", marks=case.marks))
    return out


@pytest.mark.parametrize(("case", "driver", "profile"), _matrix())
def test_sdk_assembles_the_recorded_answer_under_every_chunking(
    case: Case, driver: str, profile: str, request: pytest.FixtureRequest
) -> None:
    ans = case.run(_wiring(case, driver, profile, request))
    assert_full_answer(ans, case.recording)


# --------------------------------------------------------------------------
# Faults: the SDK raises, or reports the cut; never a shorter answer as finished

FAULTS = {
    "cut-50%": "instant;fault=cut:50%",
    "reset-50%": "instant;fault=reset:50%",
    "cut-event-3": "instant;fault=cut-event:3",
    "cut-bytes-1-split": "chunk=bytes:1;latency=instant;fault=cut:60%",
    "error-event-2": "instant;fault=error-event:2",
    "status-500": "instant;fault=status:500",
    "status-429": "instant;fault=status:429",
}

# Faults after which the complete answer is still there: the SDK must return it whole.
HARMLESS = {
    "drop-done": "instant;fault=drop-done",
    "stall-short": "instant;fault=stall:2:0.2",
}


def _fault_matrix(faults: dict[str, str]) -> list[Any]:
    out = []
    for case in CASES:
        if case.set != "lf":
            continue
        for driver in case.drivers:
            for fname, ptext in faults.items():
                out.append(pytest.param(case, driver, ptext, id=f"{case.name}-{driver}-{fname}", marks=case.marks))
    return out


@pytest.mark.parametrize(("case", "driver", "profile"), _fault_matrix(FAULTS))
def test_sdk_raises_when_a_chunked_stream_is_cut_reset_or_failed(
    case: Case, driver: str, profile: str, request: pytest.FixtureRequest
) -> None:
    """On chunked framing a cut is visible to HTTP: the SDK must raise, never return
    a shorter answer (finished or not)."""
    try:
        ans = case.run(_wiring(case, driver, profile, request))
    except AssertionError:
        raise
    except Exception:
        return  # raised: the cut was reported
    assert ans.finish is None, f"{case.name} returned a shorter answer as finished: {ans}"
    pytest.fail(f"{case.name} returned a partial answer without raising under {profile!r}: {ans}")


@pytest.mark.parametrize(("case", "driver", "profile"), _fault_matrix({"instant": "instant"}))
def test_a_recording_whose_upstream_closed_early_replays_as_a_cut_the_sdk_raises_on(
    case: Case, driver: str, profile: str, request: pytest.FixtureRequest
) -> None:
    w = _wiring(case, driver, profile, request, "upstream-closed")
    with pytest.raises(Exception) as info:
        case.run(w)
    assert not isinstance(info.value, AssertionError), info.value


def _is_timeout(exc: BaseException | None) -> bool:
    """Whether the exception, or one it was raised from, is a read timeout."""
    while exc is not None:
        if "timeout" in type(exc).__name__.lower() or "timed out" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@pytest.mark.parametrize(("case", "driver", "profile"), _fault_matrix({"stall": ""}))
def test_sdk_raises_when_a_stall_outlasts_its_read_timeout(
    case: Case, driver: str, profile: str, request: pytest.FixtureRequest
) -> None:
    """A stall before event 3 longer than the SDK's read timeout: a timeout error, never a
    short answer. In-process on the virtual clock (a 60 s stall, 5 s timeout, no waiting);
    over the server in real time (a 1.5 s stall, 0.3 s timeout)."""
    w = _wiring(case, driver, "instant;fault=stall:3:60", request)
    w.timeout = 5.0
    if driver == "server":
        w.profile, w.timeout = "instant;fault=stall:3:1.5", 0.3
    t0 = time.perf_counter()
    try:
        ans = case.run(w)
    except Exception as e:
        assert time.perf_counter() - t0 < 1.4  # gave up at the timeout, not after the stall
        assert _is_timeout(e), repr(e)
        return
    pytest.fail(f"{case.name} returned without raising after a stall past its read timeout: {ans}")


@pytest.mark.parametrize(("case", "driver", "profile"), _fault_matrix(HARMLESS))
def test_sdk_returns_the_whole_answer_when_nothing_is_lost(
    case: Case, driver: str, profile: str, request: pytest.FixtureRequest
) -> None:
    ans = case.run(_wiring(case, driver, profile, request))
    assert_full_answer(ans, case.recording)


# --------------------------------------------------------------------------
# Real time


@pytest.mark.realtime
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=c.marks) for c in (CASES[0], CASES[5])])
def test_sdk_streams_in_real_time_in_process(case: Case) -> None:
    """Faithful, realtime: the answer is whole, and takes the recorded time (not less)."""
    ix = case.recording
    t0 = time.perf_counter()
    ans = case.run(Wiring("transport", "faithful", realtime=True))
    took = time.perf_counter() - t0
    assert_full_answer(ans, ix)
    recorded = ix.pieces[-1].at_ns / 1e9
    assert recorded * 0.95 <= took <= recorded + 2.0


# --------------------------------------------------------------------------
# A close-delimited stream cut at an event boundary: HTTP cannot tell a cut
# from the end, so only the SDK's reading of the format can.

CUT_AT_EVENT = "instant;fault=cut-event:4"

# SDKs that return the partial answer without raising (finish signal absent).
SILENT_ON_CLOSE_CUT = {
    "openai-sync": "openai: a stream that ends without finish_reason or [DONE] just stops; no error",
    "openai-async": "openai: a stream that ends without finish_reason or [DONE] just stops; no error",
    "openai-tools": "openai stream helper: get_final_completion() returns the partial tool call "
    "(truncated arguments, finish_reason None) without raising",
    "anthropic-text": "anthropic: get_final_message() returns the snapshot without message_stop",
    "anthropic-tools": "anthropic: get_final_message() returns the snapshot without message_stop",
    "anthropic-async": "anthropic (async): get_final_message() returns the snapshot without message_stop",
    "ollama-sync": "ollama: iteration stops without a done:true object; no error",
    "ollama-async": "ollama: iteration stops without a done:true object; no error",
    "hf-inference-client": "huggingface_hub: text_generation stream stops without details; no error",
    "text-generation": "text-generation: generate_stream stops without details; no error",
    "hf-async-inference-client": "huggingface_hub (async, aiohttp): the stream stops without details; no error",
    "text-generation-async": "text-generation (async, aiohttp): generate_stream stops without details; no error",
}


def _close_matrix(strict_xfail: bool) -> list[Any]:
    out = []
    for case in CASES:
        if case.set != "lf":
            continue
        for driver in case.drivers:
            marks: tuple[pytest.MarkDecorator, ...] = ()
            if strict_xfail and case.name in SILENT_ON_CLOSE_CUT:
                marks = (pytest.mark.xfail(strict=True, reason=SILENT_ON_CLOSE_CUT[case.name]),)
            out.append(pytest.param(case, driver, id=f"{case.name}-{driver}", marks=(*marks, *case.marks)))
    return out


@pytest.mark.parametrize(("case", "driver"), _close_matrix(strict_xfail=False))
def test_close_delimited_cut_is_never_a_finished_answer(
    case: Case, driver: str, request: pytest.FixtureRequest
) -> None:
    try:
        ans = case.run(_wiring(case, driver, CUT_AT_EVENT, request, "close"))
    except AssertionError:
        raise
    except Exception:
        return
    exp = F.expected(case.recording)
    assert ans.finish is None, f"{case.name} returned a shorter answer as finished: {ans}"
    assert (ans.text, ans.tool_args) != (exp.text, exp.tool_args)


@pytest.mark.parametrize(("case", "driver"), _close_matrix(strict_xfail=True))
def test_sdk_raises_when_a_close_delimited_stream_is_cut_at_an_event(
    case: Case, driver: str, request: pytest.FixtureRequest
) -> None:
    """What a careful client does: a stream that stops before its finish signal is an error."""
    with pytest.raises(Exception) as info:
        case.run(_wiring(case, driver, CUT_AT_EVENT, request, "close"))
    assert not isinstance(info.value, AssertionError), info.value


# --------------------------------------------------------------------------
# Which exception: the Stainless-generated SDKs document that network problems
# raise a subclass of their APIConnectionError (``except openai.APIError``
# catches everything). A cut or reset in the middle of a stream is a network
# problem; does it arrive as the SDK's own error?

OWN_ERROR = {
    "openai-sync": "openai",
    "openai-async": "openai",
    "openai-tools": "openai",
    "anthropic-text": "anthropic",
    "anthropic-tools": "anthropic",
    "anthropic-async": "anthropic",
}
"""Whose ``APIConnectionError`` each case's SDK must raise (looked up when the test runs)."""
# anthropic before 2.17.0 let httpx2's RemoteProtocolError / ReadError escape stream
# iteration instead of anthropic.APIConnectionError (this matrix was a strict xfail
# then); 2.17.0 wraps it as openai does, and the test extra asks for it.


def _own_error_matrix() -> list[Any]:
    out = []
    for case in CASES:
        if case.name not in OWN_ERROR:
            continue
        for driver in case.drivers:
            for fname in ("cut-50%", "reset-50%"):
                out.append(pytest.param(case, driver, FAULTS[fname], id=f"{case.name}-{driver}-{fname}",
                                        marks=case.marks))
    return out


@pytest.mark.parametrize(("case", "driver", "profile"), _own_error_matrix())
def test_a_mid_stream_cut_is_the_sdks_own_connection_error(
    case: Case, driver: str, profile: str, request: pytest.FixtureRequest
) -> None:
    sdk = {"openai": openai, "anthropic": anthropic}[OWN_ERROR[case.name]]
    with pytest.raises(sdk.APIConnectionError):
        case.run(_wiring(case, driver, profile, request))
