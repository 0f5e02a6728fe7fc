"""``streamtape import``: VCR.py / pytest-recording cassettes, HAR files and mitmproxy flow files
made by the real tools, into cassettes that show, play and serve."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from mitmproxy import http as mhttp
from mitmproxy.io import FlowReader

import streamtape
from streamtape.cassette.model import Interaction, Outcome
from streamtape.interop import SYNTHETIC_TIMING_NOTE, Source, synthetic_timing
from streamtape.interop import files as interop_files
from streamtape.profiles import parse_profile
from tests.support import ROOT
from tests.support import interop_capture as cap
from tests.support.builders import MS
from tests.support.recording import run_main

SHIPPED = ROOT / "cassettes" / "test-server.tape"


@dataclass
class Captures:
    folder: Path
    vcr_httpx_yaml: cap.Captured
    vcr_requests_yaml: cap.Captured
    vcr_requests_json: cap.Captured
    pytest_recording: Path
    pytest_recording_texts: list[str]
    mitm: cap.Captured
    mitm_streamed: cap.Captured


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> Captures:
    """Every tool records the same calls once, against one scripted upstream."""
    d = tmp_path_factory.mktemp("captures")
    with cap.upstream() as up:
        vh = cap.vcr_httpx(d / "httpx.yaml", up.url)
        vr = cap.vcr_requests(d / "requests.yaml", up.url)
        vj = cap.vcr_requests(d / "requests.json", up.url, serializer="json")
        pr, pr_texts = cap.pytest_recording(d / "pr", up.url)
        mitm = cap.mitmdump(d / "dump.flow", up.url)
        streamed = cap.mitmdump(d / "streamed.flow", up.url, "--set", "stream_large_bodies=1")
    return Captures(d, vh, vr, vj, pr, pr_texts, mitm, streamed)


def import_(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    return run_main("import", *args, capsys=capsys)


def imported(capsys: pytest.CaptureFixture[str], src: Path, out: Path, *options: str) -> streamtape.Cassette:
    """What ``streamtape import SRC [OPTIONS] -o OUT`` wrote; the import must succeed."""
    code, _, err = import_(capsys, src, *options, "-o", out)
    assert code == 0, err
    return streamtape.load(out)


def shown_text(tape: Path, index: int, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = run_main("show", tape, "-i", str(index), "--text", capsys=capsys)
    assert code == 0
    return out.rstrip("\n")


# --------------------------------------------------------------------------
# What the real tools wrote comes back as what the client got


@pytest.mark.parametrize("which", ["vcr_httpx_yaml", "vcr_requests_yaml", "vcr_requests_json"])
def test_vcrpy_cassette_imports_to_the_text_each_client_got(
    captures: Captures, which: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got: cap.Captured = getattr(captures, which)
    out = tmp_path / "out.tape"
    code, stdout, err = import_(capsys, got.path, "-o", out)
    assert code == 0, err
    assert f"{got.path}: 4 interactions (vcr)" in stdout
    cas = streamtape.load(out)
    assert [shown_text(out, i, capsys) for i in range(len(cas))] == got.texts
    assert got.texts[0] == cap.TEXT
    assert all(ix.labels == {"source": "vcr"} for ix in cas)


def test_vcrpy_gzip_body_recorded_from_httpx_stays_gzip_as_recorded(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gz = imported(capsys, captures.vcr_httpx_yaml.path, tmp_path / "out.tape")[1]
    assert gz.response is not None
    assert gz.response.body[:2] == b"\x1f\x8b"
    assert gz.response.header("content-encoding") == "gzip"


def test_vcrpy_gzip_body_stored_decoded_from_requests_loses_its_content_encoding(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tape"
    code, _, err = import_(capsys, captures.vcr_requests_yaml.path, "-o", out)
    assert code == 0
    assert "gzip bodies decoded" in err
    gz = streamtape.load(out)[1]
    assert gz.response is not None
    assert gz.response.body.startswith(b"data: {")
    assert gz.response.header("content-encoding") is None
    assert gz.response.body == streamtape.load(out)[0].response.body  # type: ignore[union-attr]


def test_pytest_recording_folder_imports_every_cassette_in_it(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tape"
    code, stdout, _ = import_(capsys, captures.pytest_recording, "-o", out)
    assert code == 0
    # pytest-recording's layout: one YAML file per test, under the module's name.
    assert "test_streams/test_httpx_stream.yaml: 1 interaction (vcr)" in stdout
    assert "test_streams/test_requests_gzip_stream.yaml: 1 interaction (vcr)" in stdout
    assert [shown_text(out, i, capsys) for i in range(2)] == captures.pytest_recording_texts == [cap.TEXT] * 2


def test_mitmdump_flow_file_imports_with_the_flow_timestamps(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tape"
    code, stdout, _ = import_(capsys, captures.mitm.path, "-o", out)
    assert code == 0, stdout
    cas = streamtape.load(out)
    assert [shown_text(out, i, capsys) for i in range(len(cas))] == captures.mitm.texts
    with open(captures.mitm.path, "rb") as f:
        flows = [fl for fl in FlowReader(f).stream() if isinstance(fl, mhttp.HTTPFlow)]
    for ix, fl in zip(cas, flows, strict=True):
        assert fl.response is not None and ix.response is not None
        t0 = fl.request.timestamp_end or 0.0
        # t = 0 is when the proxy had the whole request, as for a recording.
        assert abs(ix.response.headers_at_ns - (fl.response.timestamp_start - t0) * 1e9) < 1000
        assert abs((ix.end_ns or 0) - ((fl.response.timestamp_end or 0.0) - t0) * 1e9) < 1000
        assert [p.at_ns for p in ix.pieces] == [ix.end_ns]
        assert ix.response.body == fl.response.raw_content  # as on the wire: gzip stays gzip
        assert ix.labels == {"source": "mitm"}
    assert cas[1].response is not None and cas[1].response.body[:2] == b"\x1f\x8b"


def test_mitmdump_flow_whose_body_was_streamed_imports_as_head_only_and_says_so(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tape"
    code, _, err = import_(capsys, captures.mitm_streamed.path, "-o", out)
    assert code == 0
    cas = streamtape.load(out)
    assert [ix.response.status for ix in cas if ix.response] == [200, 200]
    assert all(ix.pieces == () for ix in cas)
    assert err.count("the body was streamed, so mitmproxy did not keep it: imported as head only") == 2


def test_mitmproxy_har_export_imports_with_har_timings(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    har_path = captures.mitm.path.with_suffix(".har")
    out = tmp_path / "out.tape"
    code, stdout, err = import_(capsys, har_path, "-o", out)
    assert code == 0, err
    assert f"{har_path}: 2 interactions (har)" in stdout
    cas = streamtape.load(out)
    assert [shown_text(out, i, capsys) for i in range(2)] == captures.mitm.texts
    entries = json.loads(har_path.read_text())["log"]["entries"]
    for ix, e in zip(cas, entries, strict=True):
        assert ix.response is not None
        assert ix.end_ns == round(e["time"] * MS)
        assert ix.response.headers_at_ns == round((e["time"] - e["timings"]["receive"]) * MS)
        assert [p.at_ns for p in ix.pieces] == [ix.end_ns]
    # HAR holds bodies decoded: the gzip one keeps the text and drops its Content-Encoding.
    assert cas[1].response is not None and cas[1].response.header("content-encoding") is None
    assert "gzip bodies are stored decoded in a HAR" in err


def test_underscore_extension_fields_of_other_tools_are_ignored(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    har_path = captures.mitm.path.with_suffix(".har")
    doc = json.loads(har_path.read_text())
    for e in doc["log"]["entries"]:
        e["_resourceType"] = "fetch"
        e["_priority"] = "High"
        e["response"]["_transferSize"] = 1234
        e["response"]["_error"] = None
        e["timings"]["_blocked_queueing"] = 0.5
    marked = tmp_path / "marked.har"
    marked.write_text(json.dumps(doc))
    a, b = tmp_path / "a.tape", tmp_path / "b.tape"
    assert list(imported(capsys, har_path, a)) == list(imported(capsys, marked, b))


def test_the_synthetic_timing_note_is_said_once_for_every_file(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, err = import_(
        capsys, captures.vcr_httpx_yaml.path, captures.mitm.path, captures.mitm.path.with_suffix(".har"),
        "-o", tmp_path / "out.tape",
    )
    assert code == 0
    assert err.count(SYNTHETIC_TIMING_NOTE) == 1
    assert "wrote 8 interactions" in stdout
    sources = [synthetic_timing(ix) for ix in streamtape.load(tmp_path / "out.tape")]
    assert sources == [Source.VCR] * 4 + [Source.MITM] * 2 + [Source.HAR] * 2


def test_from_overrides_detection(captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A HAR is JSON: read as a VCR cassette it has no 'interactions'.
    code, _, err = import_(capsys, captures.mitm.path.with_suffix(".har"), "--from", "vcr", "-o", tmp_path / "x.tape")
    assert code == 2
    assert "not a VCR.py cassette (no 'interactions' list)" in err
    code, _, _ = import_(capsys, captures.mitm.path, "--from", "mitm", "-o", tmp_path / "y.tape")
    assert code == 0


def test_import_appends_to_an_existing_cassette(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tape"
    imported(capsys, captures.mitm.path, out)
    code, stdout, _ = import_(capsys, captures.vcr_httpx_yaml.path, "-o", out)
    assert code == 0
    assert "appended 4 interactions" in stdout
    assert len(streamtape.load(out)) == 6


def test_import_redacts_secrets_like_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {
        "version": 1,
        "interactions": [{
            "request": {"method": "GET", "uri": "http://x.test/v1/models?key=sk-1", "body": None,
                        "headers": {"Authorization": ["Bearer sk-secret"]}},
            "response": {"status": {"code": 200, "message": "OK"},
                         "headers": {"Set-Cookie": ["s=1"]}, "body": {"string": "{}"}},
        }],
    }
    src = tmp_path / "c.json"
    src.write_text(json.dumps(doc))
    redacted = imported(capsys, src, tmp_path / "r.tape")[0]
    kept = imported(capsys, src, tmp_path / "k.tape", "--no-redact")[0]
    assert redacted.request.header("authorization") == "REDACTED"
    assert redacted.request.url == "http://x.test/v1/models?key=REDACTED"
    assert redacted.response is not None and redacted.response.header("set-cookie") == "REDACTED"
    assert kept.request.header("authorization") == "Bearer sk-secret"


TOKEN_JWT = "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjQxMDI0NDQ4MDB9.c2lnbmF0dXJlX2ltcG9ydGVk"


def test_import_masks_the_tokens_of_a_json_answer_like_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answer = {"access_token": TOKEN_JWT, "refresh_token": "opaque-refresh", "expires_in": 3600,
              "session_secret": "named-by-the-user"}
    doc = {
        "version": 1,
        "interactions": [{
            "request": {"method": "POST", "uri": "https://iam.test/identity/token", "body": "grant_type=x",
                        "headers": {"Content-Type": ["application/x-www-form-urlencoded"]}},
            "response": {"status": {"code": 200, "message": "OK"},
                         "headers": {"Content-Type": ["application/json"]}, "body": {"string": json.dumps(answer)}},
        }],
    }
    src = tmp_path / "c.json"
    src.write_text(json.dumps(doc))
    masked = imported(capsys, src, tmp_path / "r.tape", "--redact-field", "session_secret")[0]
    kept = imported(capsys, src, tmp_path / "k.tape", "--no-redact")[0]
    assert masked.response is not None and kept.response is not None
    got = json.loads(masked.response.body)
    assert got["access_token"].rpartition(".")[0] == TOKEN_JWT.rpartition(".")[0], "a JWT keeps its payload"
    assert "c2lnbmF0dXJl" not in got["access_token"]
    assert got["refresh_token"] == "REDACTEDREDACT" and got["session_secret"] == "REDACTEDREDACTEDR"
    assert got["expires_in"] == 3600
    assert b"c2lnbmF0dXJl" not in (tmp_path / "r.tape").read_bytes()
    assert json.loads(kept.response.body) == answer


# --------------------------------------------------------------------------
# Replaying an import


def test_repeated_requests_stay_in_order_and_replay_in_turn(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tape"
    imported(capsys, captures.vcr_httpx_yaml.path, out)
    with streamtape.ReplayServer(out) as srv, httpx.Client() as c:
        got = [cap.httpx_call(c, srv.url + cap.COUNTER) for _ in range(2)]
    assert got == [cap.counter_answer(1), cap.counter_answer(2)] == captures.vcr_httpx_yaml.texts[2:]


def test_play_with_faithful_says_the_timing_of_an_import_is_synthetic(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tape"
    imported(capsys, captures.vcr_requests_yaml.path, out)
    code, stdout, err = run_main("play", out, capsys=capsys)
    assert code == 0
    assert stdout.strip() == cap.TEXT
    assert err.strip().endswith(
        "; timing synthetic (imported from vcr: the whole body as one piece at the recorded total time)"
    )
    # A profile that makes its own timing needs no warning; a real recording neither.
    assert "synthetic" not in run_main("play", out, "--profile", "chunk=events;latency=fixed:5:1",
                                       capsys=capsys)[2]
    assert "synthetic" not in run_main("play", SHIPPED, "--profile", "instant", capsys=capsys)[2]
    assert "synthetic" not in run_main("play", SHIPPED, "--profile", "faithful", capsys=capsys)[2]


def test_serve_log_line_says_the_timing_of_an_import_is_synthetic(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tape"
    imported(capsys, captures.mitm.path, out)
    lines: list[str] = []
    with streamtape.ReplayServer(out, log=lines.append) as srv, httpx.Client() as c:
        assert cap.httpx_call(c, srv.url + cap.CHAT) == cap.TEXT
        c.post(srv.url + cap.CHAT, json=cap.BODY, headers={"x-streamtape-profile": "latency=instant"}).read()
    assert lines[0].endswith(
        "outcome=complete: timing synthetic (imported from mitm: the whole body as one piece at the "
        "recorded total time)"
    )
    assert lines[1].endswith("outcome=complete")


def test_a_profile_gives_an_imported_body_a_stream_shape(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ix = imported(capsys, captures.vcr_requests_yaml.path, tmp_path / "out.tape")[0]
    assert len(ix.pieces) == 1
    sched = parse_profile("chunk=events;latency=fixed:100:20").schedule(ix)
    sends = sched.sends
    assert len(sends) == len(cap.EVENTS)
    assert [s.at_ns for s in sends] == [100 * MS + i * 20 * MS for i in range(len(cap.EVENTS))]
    random = parse_profile("chunk=random:1-16;seed=3").schedule(ix)
    assert len(random.sends) > len(cap.EVENTS)
    assert b"".join(s.data for s in random.sends) == ix.pieces[0].data


# --------------------------------------------------------------------------
# HAR as other tools write it


def chromium_entry(text: str, *, base64_body: bool = False) -> dict[str, object]:
    """An entry shaped as Chromium's devtools exports one (HTTP/2: pseudo-headers, 'h2')."""
    body = text.encode()
    content: dict[str, object] = {"size": len(body), "mimeType": "text/event-stream"}
    if base64_body:
        content.update(text=base64.b64encode(body).decode(), encoding="base64")
    else:
        content["text"] = text
    return {
        "_initiator": {"type": "script"}, "_priority": "High", "_resourceType": "fetch",
        "cache": {}, "connection": "443", "pageref": "page_1",
        "request": {
            "method": "POST", "url": "https://api.example.test/v1/chat/completions", "httpVersion": "http/2.0",
            "headers": [{"name": ":authority", "value": "api.example.test"}, {"name": ":method", "value": "POST"},
                        {"name": "content-type", "value": "application/json"},
                        {"name": "authorization", "value": "Bearer sk-x"}],
            "queryString": [], "cookies": [], "headersSize": -1, "bodySize": 15,
            "postData": {"mimeType": "application/json", "text": '{"stream":true}'},
        },
        "response": {
            "status": 200, "statusText": "", "httpVersion": "http/2.0",
            "headers": [{"name": "content-type", "value": "text/event-stream"},
                        {"name": "content-encoding", "value": "br"}],
            "cookies": [], "content": content, "redirectURL": "", "headersSize": -1, "bodySize": -1,
            "_transferSize": 1024, "_error": None,
        },
        "serverIPAddress": "203.0.113.5", "startedDateTime": "2025-11-30T12:00:00.123Z", "time": 321.5,
        "timings": {"blocked": 2.1, "dns": -1, "ssl": -1, "connect": -1, "send": 0.2, "wait": 119.2,
                    "receive": 200.0, "_blocked_queueing": 1.0},
    }


@pytest.mark.parametrize("base64_body", [False, True])
def test_chromium_shaped_har_entry_imports_as_http2_without_pseudo_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base64_body: bool
) -> None:
    text = "".join(e.decode() for e in cap.EVENTS)
    har = tmp_path / "chromium.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"},
                                       "pages": [], "entries": [chromium_entry(text, base64_body=base64_body)]}}))
    out = tmp_path / "out.tape"
    ix = imported(capsys, har, out)[0]
    assert ix.request.http_version == "HTTP/2.0"
    assert [k for k, _ in ix.request.headers] == ["content-type", "authorization"]
    assert ix.request.header("authorization") == "REDACTED"
    assert ix.request.body == b'{"stream":true}'
    assert ix.request.started_at == pytest.approx(1764504000.123)
    assert ix.response is not None
    assert ix.response.framing == "frames"
    assert ix.response.reason == "OK"  # Chromium leaves statusText empty on HTTP/2
    assert ix.response.body == text.encode()
    assert ix.response.header("content-encoding") is None
    assert (ix.response.headers_at_ns, ix.end_ns) == (round(121.5 * MS), round(321.5 * MS))
    assert shown_text(out, 0, capsys) == cap.TEXT


def test_har_entry_with_status_0_imports_as_no_response(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = chromium_entry("")
    entry["response"] = {"status": 0, "statusText": "", "httpVersion": "", "headers": [], "cookies": [],
                         "content": {}, "redirectURL": "", "headersSize": -1, "bodySize": -1,
                         "_error": "net::ERR_CONNECTION_REFUSED"}
    har = tmp_path / "failed.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "x", "version": "1"},
                                       "entries": [entry]}}))
    ix = imported(capsys, har, tmp_path / "o.tape")[0]
    assert ix.response is None
    assert ix.outcome is Outcome.UPSTREAM_ERROR


# --------------------------------------------------------------------------
# Bad input: one line naming the file and the problem, exit 2, nothing written


def _truncated_flow(captures: Captures, tmp_path: Path) -> Path:
    data = captures.mitm.path.read_bytes()
    p = tmp_path / "cut.flow"
    p.write_bytes(data[: len(data) * 3 // 4])
    return p


def _newer_vcr(captures: Captures, tmp_path: Path) -> Path:
    doc = json.loads(captures.vcr_requests_json.path.read_text())
    for item in doc["interactions"]:  # in every one: one bad interaction alone is left out, in a note
        item["response"]["elapsed_ms"] = 12
    p = tmp_path / "newer.json"
    p.write_text(json.dumps(doc))
    return p


def _newer_vcr_version(captures: Captures, tmp_path: Path) -> Path:
    doc = json.loads(captures.vcr_requests_json.path.read_text())
    doc["version"] = 2
    p = tmp_path / "v2.json"
    p.write_text(json.dumps(doc))
    return p


def _not_yaml(captures: Captures, tmp_path: Path) -> Path:
    p = tmp_path / "broken.yaml"
    p.write_text("interactions:\n- request: {method: GET\n  uri: [\n")
    return p


def _har_without_entries(captures: Captures, tmp_path: Path) -> Path:
    p = tmp_path / "empty.har"
    p.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}}}))
    return p


def _unknown_format(captures: Captures, tmp_path: Path) -> Path:
    p = tmp_path / "notes.txt"
    p.write_text("just some notes\n")
    return p


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (_not_yaml, "not YAML (line 3, column"),
        (_har_without_entries, "not a HAR file (no log.entries list)"),
        (_truncated_flow, "truncated or corrupt mitmproxy flow file after 1 flows"),
        (_newer_vcr, "its response has field elapsed_ms this streamtape does not know (a cassette from a newer vcrpy?"),
        (_newer_vcr_version, "VCR.py cassette format version 2 is newer than this streamtape reads (1)"),
        (_unknown_format, "not a VCR.py cassette, HAR file or mitmproxy flow file (name the format with --from)"),
    ],
)
def test_bad_input_is_one_line_naming_the_file_exit_2_and_nothing_written(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, problem: str
) -> None:
    bad: Path = make(captures, tmp_path)  # type: ignore[operator]
    out = tmp_path / "out.tape"
    # A good file first: it must not be written either.
    code, stdout, err = import_(capsys, captures.vcr_httpx_yaml.path, bad, "-o", out)
    assert code == 2
    lines = err.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith(f"streamtape: error: {bad}: ")
    assert problem in lines[0]
    assert "Traceback" not in err and stdout == ""
    assert not out.exists()
    assert not list(tmp_path.glob(".out.tape*"))


def test_bad_input_leaves_an_existing_cassette_unchanged(
    captures: Captures, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.tape"
    imported(capsys, captures.mitm.path, out)
    before = out.read_bytes()
    assert import_(capsys, captures.vcr_httpx_yaml.path, _not_yaml(captures, tmp_path), "-o", out)[0] == 2
    assert out.read_bytes() == before


def test_a_streamtape_cassette_is_not_imported_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = import_(capsys, SHIPPED, "-o", tmp_path / "o.tape")
    assert code == 2
    assert "is a streamtape cassette already" in err


def test_detection_reads_content_not_names(captures: Captures, tmp_path: Path) -> None:
    renamed = tmp_path / "capture.bin"
    renamed.write_bytes(captures.mitm.path.with_suffix(".har").read_bytes())
    assert interop_files.detect(renamed, renamed.read_bytes()) is Source.HAR
    flow = tmp_path / "capture.yaml"
    flow.write_bytes(captures.mitm.path.read_bytes())
    assert interop_files.detect(flow, flow.read_bytes()) is Source.MITM


def _interactions_of(path: Path) -> list[Interaction]:
    return list(interop_files.read(path).interactions)


def test_vcr_json_and_yaml_of_the_same_calls_import_alike(captures: Captures) -> None:
    def essentials(path: Path) -> list[tuple[object, ...]]:
        # The chat stream and its gzip copy (the counter answers differently each run).
        return [(ix.request.method, ix.request.path, ix.request.body, ix.response.status, ix.response.body)
                for ix in _interactions_of(path)[:2] if ix.response]

    assert essentials(captures.vcr_requests_yaml.path) == essentials(captures.vcr_requests_json.path)
    assert len(essentials(captures.vcr_requests_json.path)) == 2
