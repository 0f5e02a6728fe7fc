"""``streamtape export``: HAR 1.2 that a HAR library, mitmproxy and Chromium's importer read, and
that imports back exactly; VCR.py cassettes that vcrpy replays to requests and httpx alike."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import httpx
import jsonschema
import pytest
import requests
import vcr
from haralyzer import HarParser
from mitmproxy import http as mhttp
from mitmproxy.io import FlowReader

import streamtape
from streamtape.cassette.model import (
    Direction,
    Interaction,
    Message,
    Outcome,
    Request,
    Response,
    Setup,
    WebSocketSession,
)
from tests.support import ROOT, chromium_har, har_schema
from tests.support import interop_capture as cap
from tests.support.builders import MS, chat_events, interaction
from tests.support.chromium import needs_chromium
from tests.support.recording import run_main

SHIPPED = [ROOT / "cassettes" / "llama-cpp.tape", ROOT / "cassettes" / "test-server.tape"]
SHIPPED_TEXT = "Streaming is 日本語 for everyone."
"""What the stream of cassettes/test-server.tape assembles to."""


def gzip_ix() -> Interaction:
    """A gzip SSE stream as the recorder keeps it: the compressed bytes, in pieces."""
    raw = gzip.compress(b"".join(cap.EVENTS))
    pieces = [raw[i : i + 40] for i in range(0, len(raw), 40)]
    return interaction(pieces, extra_headers=(("Content-Encoding", "gzip"),),
                       url="http://up.test/v1/gzip/chat/completions")


def odd_ixs() -> list[Interaction]:
    """What a HAR cannot say by itself: a cut stream, no response at all, binary bodies both ways,
    an interrupted recording, a latin-1 charset, HTTP/2 framing."""
    words = chat_events(["caf", "é ", "日"])
    return [
        interaction(words[:3], outcome=Outcome.UPSTREAM_CLOSED, error="peer closed connection", labels={"k": "v"}),
        Interaction(Request("POST", "http://up.test/v1/x", body=b"{}", started_at=1764500000.25), None,
                    outcome=Outcome.UPSTREAM_ERROR, error="connection refused", end_ns=3 * MS),
        interaction([b"\x00\xff\xfe", b"\x80"], content_type="application/octet-stream", body=b"\xff\x00binary",
                    framing="content-length"),
        replace(interaction(words[:2], outcome=Outcome.INTERRUPTED, error="the recording stopped"), end_ns=None),
        interaction(["café".encode("latin-1")], content_type="text/plain; charset=iso-8859-1",
                    framing="close-delimited"),
        interaction(words, framing="frames", framing_header=False),
        replace(interaction(words), setup=Setup(wait_ns=200_000, tcp_ns=900_000, tls_ns=81 * MS)),
        session_ix(),
    ]


def session_ix() -> Interaction:
    """A WebSocket session: the upgrade, the 101, messages both ways (text and binary), the close."""
    return Interaction(
        Request("GET", "https://api.test/v1/realtime?model=m", headers=(("Upgrade", "websocket"),),
                started_at=1764500001.5),
        Response(101, "Switching Protocols", headers=(("Upgrade", "websocket"), ("Connection", "Upgrade")),
                 framing="none", headers_at_ns=40 * MS),
        end_ns=300 * MS,
        websocket=WebSocketSession(
            (
                Message(50 * MS, Direction.CLIENT, True, b'{"type":"response.create"}'),
                Message(120 * MS, Direction.SERVER, True, '{"type":"response.output_text.delta","delta":"日"}'.encode()),
                Message(130 * MS, Direction.SERVER, False, b"\x00\xffaudio"),
                Message(200 * MS, Direction.SERVER, True, b'{"type":"response.done"}'),
            ),
            1000, "bye", Direction.CLIENT,
        ),
    )


def export(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    return run_main("export", *args, capsys=capsys)


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """The shipped recordings plus gzip and the odd cases, in one cassette."""
    tape = tmp_path / "mixed.tape"
    streamtape.save(tape, [ix for p in SHIPPED for ix in streamtape.load(p)] + [gzip_ix(), *odd_ixs()])
    return tape


# --------------------------------------------------------------------------
# HAR


def test_exported_har_is_valid_har_1_2(mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.har"
    code, stdout, _ = export(capsys, mixed, "--har", out)
    assert code == 0
    n = len(streamtape.load(mixed))
    assert f"wrote {n} entries to {out}" in stdout
    doc = json.loads(out.read_text())
    har_schema.check(doc)
    assert len(doc["log"]["entries"]) == n


def test_the_har_schema_check_refuses_what_chromium_refuses(mixed: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.har"
    assert export(capsys, mixed, "--har", out)[0] == 0
    good = json.loads(out.read_text())
    for path, value in [(("log", "entries"), None), (("log", "entries", 0, "time"), "slow"),
                        (("log", "entries", 0, "startedDateTime"), "yesterday"),
                        (("log", "entries", 0, "response", "content", "size"), "12"),
                        (("log", "entries", 0, "timings"), None), (("log", "entries", 0, "request", "extra"), 1)]:
        bad = copy.deepcopy(good)
        node = bad
        for key in path[:-1]:
            node = node[key]
        if value is None:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):
            har_schema.check(bad)


def test_exported_har_reads_in_haralyzer(mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.har"
    assert export(capsys, mixed, "--har", out)[0] == 0
    entries = HarParser(json.loads(out.read_text())).pages[0].entries
    cas = streamtape.load(mixed)
    assert len(entries) == len(cas)
    by_url = {(e.request.method, e.request.url, e.response.status) for e in entries}
    assert by_url == {(ix.request.method, ix.request.url, ix.response.status if ix.response else 0) for ix in cas}
    llama = next(e for e in entries if e.request.url.endswith("/v1/messages"))
    assert "event: message_start" in llama.response.text
    assert llama.response.mimeType == "text/event-stream"


def test_mitmproxy_reads_the_exported_har_to_the_same_requests_and_bodies(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.har"
    assert export(capsys, mixed, "--har", out)[0] == 0
    with open(out, "rb") as f:
        flows = [fl for fl in FlowReader(f).stream() if isinstance(fl, mhttp.HTTPFlow)]
    cas = [ix for ix in streamtape.load(mixed) if ix.response is not None]
    with_response = [fl for fl in flows if fl.response is not None and fl.response.status_code]
    assert len(with_response) == len(cas)
    for ix, fl in zip(cas, with_response, strict=True):
        assert ix.response is not None and fl.response is not None
        assert (fl.request.method, fl.request.url) == (ix.request.method, ix.request.url)
        assert fl.request.raw_content == ix.request.body or not ix.request.body.isascii()
        assert fl.response.status_code == ix.response.status
        if ix.response.content_type in ("text/event-stream", "application/x-ndjson"):
            # mitmproxy's reader decodes what it re-encodes: the decoded body is the client's view.
            want = ix.response.body
            if ix.response.header("content-encoding") == "gzip":
                want = gzip.decompress(want)
            assert fl.response.content == want


def test_mitmdump_opens_the_exported_har(mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.har"
    assert export(capsys, mixed, "--har", out)[0] == 0
    mitmdump = str(Path(sys.executable).with_name("mitmdump"))
    run = subprocess.run([mitmdump, "-n", "-r", str(out), "--flow-detail", "1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "POST http://127.0.0.1:" in run.stdout and "/v1/messages" in run.stdout


def test_har_round_trip_gives_back_every_piece_offset_outcome_and_label(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    har, back = tmp_path / "out.har", tmp_path / "back.tape"
    assert export(capsys, mixed, "--har", har)[0] == 0
    code, _, err = run_main("import", har, "--no-redact", "-o", back, capsys=capsys)
    assert code == 0
    assert "keep no piece boundaries" not in err  # nothing synthetic about it
    original, again = list(streamtape.load(mixed)), list(streamtape.load(back))
    assert again == original
    assert sum(len(ix.pieces) for ix in again) > len(again)


def test_har_entry_whose_body_was_edited_is_refused(mixed: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    har = tmp_path / "out.har"
    assert export(capsys, mixed, "--har", har)[0] == 0
    doc = json.loads(har.read_text())
    doc["log"]["entries"][0]["response"]["content"]["text"] += "more"
    har.write_text(json.dumps(doc))
    code, _, err = run_main("import", har, "-o", tmp_path / "x.tape", capsys=capsys)
    assert code == 2
    assert f"{har}: entry 0: _streamtape pieces add up to" in err


# --------------------------------------------------------------------------
# VCR


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_vcr_export_replays_the_same_text_to_requests_and_httpx(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    tape = tmp_path / "src.tape"
    ixs = [*streamtape.load(SHIPPED[1]), gzip_ix()]
    streamtape.save(tape, ixs)
    out = tmp_path / f"out{suffix}"
    assert export(capsys, tape, "--vcr", out)[0] == 0
    got: dict[str, list[str]] = {}
    for client in ("requests", "httpx"):
        with vcr.use_cassette(str(out), record_mode="none", serializer=suffix[1:],
                              allow_playback_repeats=True):
            texts = []
            for ix in ixs:
                if client == "requests":
                    with requests.Session() as s, s.post(ix.request.url, data=ix.request.body,
                                                         headers=dict(ix.request.headers), stream=True) as r:
                        r.encoding = "utf-8"
                        texts.append(cap.sse_text(r.iter_lines(decode_unicode=True)))
                else:
                    with httpx.Client() as c, c.stream("POST", ix.request.url, content=ix.request.body) as r:
                        texts.append(cap.sse_text(r.iter_lines()))
            got[client] = texts
    assert got["requests"] == got["httpx"] == [SHIPPED_TEXT, cap.TEXT]


def test_vcr_export_stores_bodies_decoded_without_content_encoding(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    tape = tmp_path / "src.tape"
    streamtape.save(tape, [gzip_ix()])
    out = tmp_path / "out.yaml"
    assert export(capsys, tape, "--vcr", out)[0] == 0
    with vcr.use_cassette(str(out), record_mode="none") as cassette:
        assert len(cassette.data) == 1
        _, response = cassette.data[0]
    headers = {k.lower(): v for k, v in response["headers"].items()}
    assert "content-encoding" not in headers and "transfer-encoding" not in headers
    body = response["body"]["string"]
    assert body == b"".join(cap.EVENTS)
    assert headers["content-length"] == [str(len(body))]


def test_pytest_recording_replays_an_exported_cassette(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "src.tape"
    streamtape.save(src, [gzip_ix()])
    folder = tmp_path / "proj"
    cassette = folder / "cassettes" / "test_replay" / "test_stream.yaml"
    cassette.parent.mkdir(parents=True)
    assert export(capsys, src, "--vcr", cassette)[0] == 0
    (folder / "test_replay.py").write_text(textwrap.dedent(f'''
        import httpx, pytest

        @pytest.mark.vcr
        def test_stream():
            with httpx.Client() as c, c.stream("POST", {gzip_ix().request.url!r}, content=b"{{}}") as r:
                body = r.read().decode()
            assert "data: [DONE]" in body and {cap.WORDS[4]!r} in body
    '''))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--record-mode=none",
                          "test_replay.py"], cwd=folder, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_vcr_export_leaves_out_what_vcr_cannot_hold_and_says_so(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    tape = tmp_path / "src.tape"
    streamtape.save(tape, odd_ixs()[:2])
    out = tmp_path / "out.yaml"
    code, stdout, err = export(capsys, tape, "--vcr", out)
    assert code == 0
    assert "wrote 1 interactions" in stdout
    assert "interaction 1: no response head (upstream_error): a VCR cassette cannot hold it, left out" in err
    assert "interaction 0 ended upstream_closed" in err


def test_binary_body_to_a_json_vcr_cassette_is_one_line_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tape = tmp_path / "src.tape"
    streamtape.save(tape, [odd_ixs()[2]])
    out = tmp_path / "out.json"
    code, _, err = export(capsys, tape, "--vcr", out)
    assert code == 2
    assert err.strip().splitlines() == [
        f"streamtape: error: {out}: interaction 0: the request body is not UTF-8 text, which a JSON VCR "
        "cassette cannot hold: write YAML (.yaml) instead"
    ]
    assert not out.exists()


def test_export_needs_an_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = export(capsys, SHIPPED[0])
    assert code == 2
    assert "name at least one output, --har FILE or --vcr FILE" in err


def test_vcr_export_imports_back_to_the_same_requests_and_bodies(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out, back = tmp_path / "out.yaml", tmp_path / "back.tape"
    assert export(capsys, SHIPPED[0], "--vcr", out)[0] == 0
    assert run_main("import", out, "-o", back, capsys=capsys)[0] == 0
    original, again = streamtape.load(SHIPPED[0]), streamtape.load(back)
    assert [(ix.request.method, ix.request.url, ix.request.body) for ix in again] == [
        (ix.request.method, ix.request.url, ix.request.body) for ix in original]
    assert [ix.response.body for ix in again if ix.response] == [ix.response.body for ix in original if ix.response]


# --------------------------------------------------------------------------
# Chromium


@needs_chromium
def test_chromium_devtools_har_importer_reads_the_exported_har(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.har"
    assert export(capsys, mixed, "--har", out)[0] == 0
    shown = chromium_har.import_har(out.read_text(), tmp_path / "chromium-profile")
    # The importer orders entries by start time (a stable sort), as the panel lists them.
    cas = sorted(streamtape.load(mixed), key=lambda ix: ix.request.started_at)
    assert len(shown) == len(cas)
    for ix, got in zip(cas, shown, strict=True):
        assert (got["method"], got["url"]) == (ix.request.method, ix.request.url)
        if ix.response is None:
            assert got["status"] == 0
            continue
        assert got["status"] == ix.response.status
        if ix.websocket is not None:
            # The WebSocket panel's frames: Chromium reads them from _webSocketMessages.
            assert got["resourceType"] == "websocket"
            assert [(t, op) for t, op, _ in got["frames"]] == [
                ("send" if m.direction == "client" else "receive", 1 if m.text else 2) for m in ix.websocket.messages
            ]
            continue
        assert got["mimeType"].split(";")[0] == ix.response.content_type
        # Chromium counts the head from the start of the request: a new connection's setup first.
        setup_ns = sum(ix.setup.marks.values()) if ix.setup is not None else 0
        assert got["headersEnd"] == pytest.approx((setup_ns + ix.response.headers_at_ns) / MS)
        body = ix.response.body
        if ix.response.header("content-encoding") == "gzip":
            body = gzip.decompress(body)
        shown_body = base64.b64decode(got["base64"]) if got["base64"] is not None else got["text"].encode()
        assert shown_body == body


@needs_chromium
def test_chromium_devtools_har_importer_refuses_a_har_without_entries(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"log\.entries is expected to be an array"):
        chromium_har.import_har(json.dumps({"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}}}),
                                tmp_path / "chromium-profile")


def test_har_keeps_a_session_for_chromium_and_the_setup_marks_in_har_timings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tape, out = tmp_path / "src.tape", tmp_path / "out.har"
    streamtape.save(tape, odd_ixs()[-2:])
    assert export(capsys, tape, "--har", out)[0] == 0
    setup_entry, session_entry = json.loads(out.read_text())["log"]["entries"]
    assert setup_entry["timings"]["connect"] == pytest.approx(81.9)
    assert setup_entry["timings"]["ssl"] == pytest.approx(81.0)
    assert session_entry["_resourceType"] == "websocket"
    sent = [(m["type"], m["opcode"]) for m in session_entry["_webSocketMessages"]]
    assert sent == [("send", 1), ("receive", 1), ("receive", 2), ("receive", 1)]
    assert session_entry["_webSocketMessages"][1]["data"] == '{"type":"response.output_text.delta","delta":"日"}'


def test_vcr_export_leaves_out_a_websocket_session_and_says_so(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    tape, out = tmp_path / "src.tape", tmp_path / "out.yaml"
    streamtape.save(tape, [session_ix(), gzip_ix()])
    code, stdout, err = export(capsys, tape, "--vcr", out)
    assert code == 0
    assert "wrote 1 interactions" in stdout
    assert "interaction 0: a WebSocket session: VCR cassettes hold HTTP only, left out" in err
