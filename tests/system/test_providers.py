"""Hosted providers' SDKs recorded through ``streamtape record`` and replayed by ``streamtape serve``.

Each stream of :mod:`tests.support.providers` (Gemini SSE, Vertex CRLF, the Gemini
JSON array, the Gemini Interactions API, Bedrock converse-stream and
invoke-with-response-stream, a Bedrock throttling exception, Cohere v2, Mistral,
Azure OpenAI, the Assistants, Replicate, watsonx.ai) is recorded once, the
official SDK talking to the real recorder (reverse proxy) in front of the
scripted upstream. Then ``streamtape serve`` replays the cassette into the same
SDK under ``faithful`` and every adversarial profile (chosen per request with
the profile header): the SDK must assemble the answer the script spells, or
raise where the stream is cut. The SDKs on httpx or httpx2 also get the
in-process :class:`streamtape.ReplayTransport`.

Replicate's SDK follows the absolute ``urls.stream`` of the prediction it created, and
watsonx.ai's takes https URLs only (an IAM token, the project and the model specs come
first): both are recorded through the recorder as a regular proxy (``--mode regular
--all``; watsonx.ai over TLS from a TLS upstream, the recorder's CA trusted), the three
recordings joined by ``streamtape merge``. ``serve`` answers Replicate's prediction with
its URLs pointed at itself; watsonx.ai is replayed by ``serve --proxy``.

boto3 signs every call afresh (a new ``X-Amz-Date``, signature and invocation
id): the replays show that a Bedrock recording answers it all the same.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import streamtape
from streamtape import Interaction
from streamtape.profiles import ADVERSARIAL
from tests.support import providers as P
from tests.support.builders import interaction
from tests.support.processes import STREAMTAPE, Child, start
from tests.support.recording import recording, run_main
from tests.support.servers import self_signed_tls

pytest.importorskip("boto3")
pytest.importorskip("cohere")
from botocore.exceptions import EventStreamError  # type: ignore[import-untyped]

from tests.support import provider_sdks as S

NO_HTTPX2 = "needs httpx2 (google-genai, mistralai, openai), left out of the test extra on Python 3.11"
try:
    import google.genai
    import mistralai
    import openai

    HAVE_HTTPX2 = bool(google.genai and mistralai and openai)
except ImportError:
    HAVE_HTTPX2 = False

pytestmark = pytest.mark.slow

STREAMS = P.streams()
NAMES = list(STREAMS)
PROFILES = {"faithful": "faithful", **{f"adversarial:{k}": v for k, v in ADVERSARIAL.items()}}


GENAI_COMMENTS = (
    "google-genai (3.6) parses every non-blank SSE line after stripping 'data:' as JSON, so an SSE "
    "comment line (': keepalive', legal SSE that clients must ignore) raises UnknownApiResponseError"
)
FINDINGS = {
    ("gemini-sse", "adversarial:keepalive"): GENAI_COMMENTS,
    ("gemini-crlf", "adversarial:keepalive"): GENAI_COMMENTS,
}
"""Which SDK breaks under which profile: each a strict xfail of the matrix, pinned as it
is by a companion test below."""


def matrix(names: list[str]) -> list[object]:
    out: list[object] = []
    for name in names:
        for pid, profile in PROFILES.items():
            marks = _needs(name)
            if (name, pid) in FINDINGS:
                marks = [*marks, pytest.mark.xfail(strict=True, reason=FINDINGS[name, pid])]
            out.append(pytest.param(name, profile, id=f"{name}-{pid}", marks=marks))
    return out


def _needs(name: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.skipif(not HAVE_HTTPX2, reason=NO_HTTPX2)] if name in S.HTTPX2_STREAMS else []


def each_stream(names: list[str] = NAMES) -> list[object]:
    return [pytest.param(n, id=n, marks=_needs(n)) for n in names]


@dataclass(frozen=True)
class Recorded:
    path: Path
    interactions: dict[str, Interaction]
    """Each stream's own interaction (the last of its SDK call's)."""
    index: dict[str, int]
    calls: dict[str, list[Interaction]]
    """Every interaction of each stream's SDK call, in order (the calls before the stream too)."""


def _record(out: Path, names: list[str], upstream: str, *, regular: bool, confdir: Path | None = None) -> None:
    """``names``' SDK calls through one ``streamtape record``: reverse mode in front of
    ``upstream``, or (``regular``) a regular proxy every request of the SDK goes through,
    recording every response (``--all``: the calls before the stream are JSON)."""
    mode = ("--mode", "regular", "--all") if regular else ()
    tls = ("--insecure", "--confdir", str(confdir)) if confdir else ()
    ca = str(confdir / CA) if confdir else None
    with recording(out, *mode, *tls, upstream=None if regular else upstream) as rec:
        for name in names:
            target = S.Target(base=upstream, proxy=rec.url, ca=ca) if regular else S.Target(base=rec.url)
            try:
                S.call(name, target)
            except Exception as e:  # the throttled stream ends in the SDK's exception: that is the recording
                assert STREAMS[name].error is not None, f"{name}: {e!r}"
        rec.wait_lines(sum(1 + len(STREAMS[n].before) for n in names))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, confdir: Path) -> Iterator[Recorded]:
    """Every stream the SDK can reach recorded once, SDK -> streamtape record -> upstream (the
    reverse proxy; the regular proxy for an SDK that follows an absolute URL), the two
    recordings joined by ``streamtape merge``."""
    tmp = tmp_path_factory.mktemp("providers")
    out = tmp / "providers.tape"
    reachable = [n for n in NAMES if HAVE_HTTPX2 or n not in S.HTTPX2_STREAMS]
    reverse = [n for n in reachable if n not in S.REGULAR_MODE]
    regular = [n for n in reachable if n in S.REGULAR_MODE and n not in S.HTTPS_ONLY]
    https = [n for n in reachable if n in S.HTTPS_ONLY]
    with P.upstream() as up, P.upstream(tls=self_signed_tls()) as tls_up:
        _record(tmp / "reverse.tape", reverse, up.url, regular=False)
        _record(tmp / "regular.tape", regular, up.url, regular=True)
        _record(tmp / "https.tape", https, tls_up.url, regular=True, confdir=confdir)
    code = subprocess.run([*STREAMTAPE, "merge", *(str(tmp / f) for f in ("reverse.tape", "regular.tape", "https.tape")),
                           "-o", str(out)], capture_output=True, text=True)
    assert code.returncode == 0, code.stderr
    ixs = streamtape.load(out)
    names = reverse + regular + https
    assert len(ixs) == sum(1 + len(STREAMS[n].before) for n in names)
    calls: dict[str, list[Interaction]] = {}
    index: dict[str, int] = {}
    i = 0
    for name in names:
        n = 1 + len(STREAMS[name].before)
        calls[name] = list(ixs[i:i + n])
        index[name] = i + n - 1
        i += n
    yield Recorded(out, {n: c[-1] for n, c in calls.items()}, index, calls)


CA = "mitmproxy-ca-cert.pem"


@pytest.fixture(scope="module")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mitmproxy folder (its CA) the HTTPS-only SDKs trust, recording and replaying alike."""
    return tmp_path_factory.mktemp("mitm")


@pytest.fixture(scope="module")
def server(recorded: Recorded) -> Iterator[Child]:
    with start([*STREAMTAPE, "serve", str(recorded.path), "--port", "0"], r"on (http://\S+) \(profile") as proc:
        yield proc


@pytest.fixture(scope="module")
def proxy_server(recorded: Recorded, confdir: Path) -> Iterator[Child]:
    """``streamtape serve --proxy``: the replay the HTTPS-only SDKs reach (their URL kept, the
    proxy's CA trusted), every request it does not answer refused."""
    with start([*STREAMTAPE, "serve", "--proxy", "--refuse-unmatched", "--port", "0", "--confdir", str(confdir),
                str(recorded.path)], r"replay proxy on (\S+?:\d+)") as proc:
        yield proc


def _target(name: str, recorded: Recorded, request: pytest.FixtureRequest, profile: str) -> S.Target:
    """Where ``name``'s SDK reaches the replay: ``streamtape serve``'s URL, or for an HTTPS-only
    SDK its recorded URL through ``streamtape serve --proxy``."""
    if name not in S.HTTPS_ONLY:
        server: Child = request.getfixturevalue("server")
        return S.Target(base=server.url, profile=profile)
    proxy: Child = request.getfixturevalue("proxy_server")
    url = recorded.interactions[name].request.url
    base = url[: url.index("/", len("https://"))]
    return S.Target(base=base, profile=profile, proxy=proxy.url,
                    ca=str(request.getfixturevalue("confdir") / CA))


def test_each_format_is_recorded_byte_for_byte_with_its_pieces(recorded: Recorded):
    for name, ix in recorded.interactions.items():
        stream = STREAMS[name]
        assert ix.response is not None and ix.response.status == 200, name
        assert ix.response.body == stream.body, name
        assert len(ix.response.pieces) >= len(stream.pieces) // 2, name  # one HTTP chunk each, coalesced at most
        assert ix.request.path.startswith(stream.path) or ix.request.url.split("?")[0].endswith(stream.path), name


def test_no_key_token_or_signature_reaches_the_cassette(recorded: Recorded):
    raw = recorded.path.read_bytes()
    for secret in S.SECRETS:
        assert secret.encode() not in raw
    for name, ix in recorded.interactions.items():
        headers = {k.lower(): v for k, v in ix.request.headers}
        for secret_header in ("authorization", "x-goog-api-key", "x-amz-security-token", "api-key"):
            if secret_header in headers:
                assert headers[secret_header] == "REDACTED", (name, secret_header)
    bedrock = {k.lower(): v for k, v in recorded.interactions["bedrock-converse"].request.headers}
    assert bedrock["x-amz-security-token"] == "REDACTED" and bedrock["authorization"] == "REDACTED"
    gemini = {k.lower(): v for k, v in recorded.interactions["gemini-array"].request.headers}
    assert gemini["x-goog-api-key"] == "REDACTED"


def test_the_watsonx_api_key_in_the_iam_form_body_does_not_reach_the_cassette(recorded: Recorded):
    assert S.WATSONX_KEY.encode() not in recorded.path.read_bytes()


def test_the_iam_token_answer_reaches_the_cassette_with_its_signature_masked(recorded: Recorded):
    assert P.WATSONX_TOKEN_SIGNATURE.encode() not in recorded.path.read_bytes()
    token = recorded.calls["watsonx-stream"][0]
    answer = json.loads(b"".join(p.data for p in token.pieces))
    kept, _, signature = answer["access_token"].rpartition(".")
    assert kept == P.WATSONX_TOKEN.rpartition(".")[0], "the payload (its expiry) is kept"
    assert len(signature) == len(P.WATSONX_TOKEN_SIGNATURE) and set(signature) <= set("REDACT")


def test_the_gzipped_iam_token_answer_is_stored_decoded_with_a_true_head(recorded: Recorded):
    token = recorded.calls["watsonx-stream"][0]
    assert token.response is not None
    assert "gzip" in (token.request.header("accept-encoding") or ""), "the scripted IAM answer came gzipped"
    assert token.response.header("content-encoding") is None, "masked, so stored decoded"
    assert token.response.header("content-length") == str(len(token.response.body))
    assert json.loads(token.response.body)["token_type"] == "Bearer"


def test_the_iam_token_call_keeps_its_other_form_fields_as_sent_and_the_key_as_redacted(recorded: Recorded):
    token = recorded.calls["watsonx-stream"][0]
    assert token.request.path == "/identity/token"
    # The SDK's field order is its own (seen both ways here); each field stays as sent.
    fields = sorted(token.request.body.split(b"&"))
    assert fields == [b"apikey=REDACTED", b"grant_type=urn%3Aibm%3Aparams%3Aoauth%3Agrant-type%3Aapikey"]


def _check(name: str, got: S.Answer) -> None:
    want = S.expected(STREAMS[name])
    assert got.text == want.text
    assert got.reasoning == want.reasoning
    assert got.tool_calls == want.tool_calls
    assert got.finish == want.finish


def _run(name: str, target: S.Target) -> None:
    stream = STREAMS[name]
    if stream.error is None:
        _check(name, S.call(name, target))
        return
    with pytest.raises(Exception, match=stream.error):
        S.call(name, target)


@pytest.mark.parametrize(("name", "profile"), matrix(NAMES))
def test_serve_replays_each_recording_into_its_sdk_under_every_profile(
    recorded: Recorded, request: pytest.FixtureRequest, name: str, profile: str
):
    _run(name, _target(name, recorded, request, profile))


@pytest.mark.parametrize(("name", "profile"), matrix(list(S.HTTPX_SDKS)))
def test_the_in_process_transport_serves_each_httpx_sdk_under_every_profile(
    recorded: Recorded, name: str, profile: str
):
    transport = streamtape.ReplayTransport(recorded.calls[name], profile, realtime=False)
    _run(name, S.Target(transport=transport))


@pytest.mark.skipif(not HAVE_HTTPX2, reason=NO_HTTPX2)
@pytest.mark.parametrize("name", ["gemini-sse", "gemini-crlf"])
def test_google_genai_raises_on_an_sse_comment_line_where_other_sdks_skip_it(server: Child, name: str):
    """The companion of the keepalive findings: what google-genai does with a comment line."""
    from google.genai.errors import UnknownApiResponseError

    with pytest.raises(UnknownApiResponseError, match="Raw response: : keepalive"):
        S.call(name, S.Target(base=server.url, profile=ADVERSARIAL["keepalive"]))
    # the same stream without the comment is read in full (the events profile alone)
    _run(name, S.Target(base=server.url, profile=ADVERSARIAL["events"]))


@pytest.mark.skipif(not HAVE_HTTPX2, reason=NO_HTTPX2)
def test_an_injected_error_event_reaches_google_genais_interactions_client_as_its_error_event(server: Child):
    """``fault=error-event:N`` on an Interactions stream sends the API's own ``event: error``,
    which the SDK types as an ``ErrorEvent`` (not an unknown event) with the message."""
    from streamtape.profiles.schedule import ERROR_MESSAGE

    events = list(S.interactions_stream(S.Target(base=server.url, profile="instant;fault=error-event:8")))
    kinds = [e.event_type for e in events]
    assert kinds[:3] == ["interaction.created", "interaction.status_update", "step.start"]
    assert kinds[-1] == "error" and "interaction.completed" not in kinds
    assert type(events[-1]).__name__ == "ErrorEvent"
    assert (events[-1].error.code, events[-1].error.message) == ("internal", ERROR_MESSAGE)


def test_a_throttling_exception_replays_to_boto3_after_the_text_before_it(server: Child):
    base = server.url
    with pytest.raises(EventStreamError) as exc:
        S.bedrock_converse(S.Target(base=base, profile="instant"), P.BEDROCK_THROTTLED)
    assert exc.value.response["Error"]["Code"] == "throttlingException"


def test_a_replayed_exception_fault_reaches_boto3_as_throttling_mid_stream(server: Child):
    """``fault=exception:N:TYPE`` ends the whole recorded converse stream in an exception message."""
    client = S._bedrock(S.Target(base=server.url, profile="instant;fault=exception:3:throttlingException"))
    r = client.converse_stream(modelId=P.BEDROCK_MODEL, messages=[{"role": "user", "content": [{"text": S.PROMPT}]}])
    seen = []
    with pytest.raises(EventStreamError) as exc:
        seen.extend(r["stream"])
    assert exc.value.response["Error"]["Code"] == "throttlingException"
    assert [next(iter(ev)) for ev in seen] == ["messageStart", "contentBlockDelta", "contentBlockDelta"]


CUT = "instant;fault=cut:60%"


@pytest.mark.parametrize("name", each_stream([n for n in NAMES if STREAMS[n].error is None]))
def test_a_cut_stream_makes_each_sdk_raise_or_come_short_never_finish(server: Child, name: str):
    base = server.url
    try:
        got = S.call(name, S.Target(base=base, profile=CUT))
    except Exception:
        return  # the SDK noticed the cut
    want = S.expected(STREAMS[name])
    assert (got.text, got.tool_calls, got.finish) != (want.text, want.tool_calls, want.finish)
    assert got.finish is None, f"{name}: a cut stream handed back as finished ({got.finish})"


def test_serve_strict_nulls_refuses_an_absent_field_for_a_recorded_null(tmp_path: Path):
    ix = interaction([b'{"done": true}\n'], content_type="application/x-ndjson", url="http://h/api/chat",
                     body=json.dumps({"model": "m", "keep_alive": None}).encode())
    tape = tmp_path / "null.tape"
    streamtape.save(tape, [ix])
    import httpx

    for extra, status in (((), 200), (("--strict-nulls",), 422)):
        with start([*STREAMTAPE, "serve", str(tape), "--port", "0", *extra], r"on (http://\S+) \(profile") as srv:
            r = httpx.post(f"{srv.url}/api/chat", json={"model": "m"})
            assert r.status_code == status, (extra, r.text)


SHAPES = {"gemini-sse": "gemini", "gemini-crlf": "gemini", "gemini-array": "gemini",
          "gemini-interactions": "gemini-interactions",
          "bedrock-converse": "bedrock-converse", "bedrock-throttled": "bedrock-converse",
          "bedrock-invoke": "bedrock-invoke", "cohere-chat": "cohere", "mistral-chat": "openai-chat",
          "azure-chat": "azure-openai", "assistants-run": "openai-assistants", "replicate-stream": "replicate",
          "watsonx-stream": "watsonx"}
FINISH = {"STOP": "stop", "end_turn": "stop", "requires_action": "tool_calls", "tool_use": "tool_calls",
          "TOOL_CALL": "tool_calls", "stop": "stop", "completed": "stop", "done": "stop", "eos_token": "stop"}
RAW_FINISH = {"done": None}
"""A raw finish the stream does not spell: Replicate's ``event: done`` says ``{}`` (no reason)."""


def test_show_reads_each_recording_as_its_format_with_the_sdks_answer(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
):
    for name, i in recorded.index.items():
        stream = STREAMS[name]
        code, out, err = run_main("show", recorded.path, "-i", i, "--json", capsys=capsys)
        assert code == 0, err
        doc = json.loads(out)
        assert doc["analysis"]["shape"] == SHAPES[name], name
        choice = doc["result"]["choices"][0]
        assert choice["text"] == stream.text, name
        assert choice["reasoning"] == stream.reasoning, name
        assert [(t["name"], t["parsed"]) for t in choice["tool_calls"]] == list(stream.tool_calls), name
        if stream.error is None:
            raw = RAW_FINISH.get(stream.finish, stream.finish)
            assert choice["finish"] == {"reason": FINISH[stream.finish], "raw": raw}, name
        assert doc["stats"]["ttft_ms"] is not None and doc["stats"]["ttft_ms"] > 0, name
        code, text, _ = run_main("show", recorded.path, "-i", i, "--text", capsys=capsys)
        assert code == 0 and text.rstrip("\n") == stream.text, name


def test_check_finds_the_throttling_exception_and_nothing_in_the_whole_streams(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
):
    code, out, err = run_main("check", recorded.path, "--json", capsys=capsys)
    assert code == 1, err
    doc = json.loads(out)
    items = doc if isinstance(doc, list) else doc.get("interactions", doc.get("findings", []))
    streams = set(recorded.index.values())
    flagged = {int(item["index"]) for item in items if item.get("findings") and int(item["index"]) in streams}
    assert flagged == {recorded.index["bedrock-throttled"]}, out[:2000]
    assert "throttlingException" in out
    # The JSON calls before a stream (watsonx's token, project, model specs; Replicate's
    # prediction) asked for no stream: check passes them.
    before = {int(item["index"]): {f["code"] for f in item["findings"]} for item in items
              if int(item["index"]) not in streams}
    assert len(before) == sum(len(STREAMS[n].before) for n in recorded.calls), before
    assert all(codes == set() for codes in before.values()), before


def test_show_lists_every_recording(recorded: Recorded, capsys: pytest.CaptureFixture[str]):
    code, out, _ = run_main("show", recorded.path, capsys=capsys)
    assert code == 0
    for stream in STREAMS.values():
        if stream.name in recorded.interactions:
            assert stream.path.split("/")[-1].split(":")[0] in out or stream.path in out
