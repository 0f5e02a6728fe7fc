"""``streamtape import`` of VCR.py cassettes holding hosted providers' streams (issue 20).

The files are built here the way their writers write them: pytest-recording's
(vcrpy's YAML, a binary body as ``!!binary`` base64: Bedrock's event stream, and
the bytes boto3 sends), pydantic-ai's ``parsed_body`` dialect (a JSON body written
parsed, on requests and responses), and a file with one bad interaction among
good ones. ``show`` reads an imported stream as it reads the same stream recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import streamtape
from streamtape.match import Matcher
from tests.support import providers as P
from tests.support.builders import interaction
from tests.support.recording import run_main

STREAMS = P.streams()


def _vcr_interaction(stream: P.Stream, request_body: Any, *, host: str = "https://api.test") -> dict[str, Any]:
    body = stream.body
    return {
        "request": {"method": "POST", "uri": host + stream.path, "body": request_body,
                    "headers": {"Content-Type": ["application/json"], "Authorization": ["Bearer sk-secret-1"]}},
        "response": {"status": {"code": 200, "message": "OK"},
                     "headers": {"Content-Type": [stream.content_type], "Content-Length": [str(len(body))]},
                     # vcrpy keeps UTF-8 bodies as text and everything else as bytes (!!binary)
                     "body": {"string": body if stream.content_type == P.EVENTSTREAM else body.decode()}},
    }


def _show(path: Path, index: int, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run_main("show", path, "-i", index, "--json", capsys=capsys)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)["result"]
    return result


def _recorded_result(stream: P.Stream, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``show``'s result for the stream as streamtape itself records it (one piece per event)."""
    tape = tmp_path / f"{stream.name}.tape"
    streamtape.save(tape, [interaction(list(stream.pieces), content_type=stream.content_type,
                                       url="https://api.test" + stream.path)])
    return _show(tape, 0, capsys)


def _import(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    return run_main("import", *args, capsys=capsys)


def test_a_pytest_recording_cassette_with_binary_bodies_imports_and_reads_as_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    converse, invoke = STREAMS["bedrock-converse"], STREAMS["bedrock-invoke"]
    doc = {"version": 1, "interactions": [
        _vcr_interaction(converse, b'{"messages":[{"role":"user","content":[{"text":"Say hello"}]}]}'),
        _vcr_interaction(invoke, json.dumps({"max_tokens": 9}).encode()),
    ]}
    path = tmp_path / "test_bedrock.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert "!!binary" in path.read_text()
    out = tmp_path / "out.tape"
    code, _, err = _import(capsys, path, "-o", out)
    assert code == 0, err
    ixs = streamtape.load(out)
    assert [ix.response.body for ix in ixs if ix.response] == [converse.body, invoke.body]
    assert ixs[0].request.body.startswith(b'{"messages"')
    assert b"sk-secret-1" not in out.read_bytes()
    for i, stream in enumerate((converse, invoke)):
        assert _show(out, i, capsys) == _recorded_result(stream, tmp_path, capsys)


def _pydantic_ai(stream: P.Stream, request: dict[str, Any]) -> dict[str, Any]:
    """An interaction as pydantic-ai's serializer writes it: lower-case headers, JSON bodies parsed."""
    item = _vcr_interaction(stream, None)
    item["request"].pop("body")
    item["request"]["parsed_body"] = request
    item["request"]["headers"] = {"content-type": ["application/json"]}
    item["response"]["headers"] = {k.lower(): v for k, v in item["response"]["headers"].items()}
    if stream.content_type.startswith("application/json"):
        item["response"].pop("body")
        item["response"]["parsed_body"] = json.loads(stream.body)
    return item


def test_pydantic_ais_parsed_body_dialect_imports_with_the_bodies_its_loader_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    array, sse = STREAMS["gemini-array"], STREAMS["gemini-sse"]
    req = {"contents": [{"role": "user", "parts": [{"text": "Say hello"}]}], "generationConfig": None}
    doc = {"version": 1, "interactions": [_pydantic_ai(array, req), _pydantic_ai(sse, req)]}
    path = tmp_path / "test_gemini.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    out = tmp_path / "out.tape"
    code, _, err = _import(capsys, path, "-o", out)
    assert code == 0, err
    ixs = streamtape.load(out)
    # json.dumps of what the YAML holds (PyYAML sorted its keys), as pydantic-ai's loader does
    held = yaml.safe_load(path.read_text())["interactions"][0]
    assert ixs[0].request.body == json.dumps(held["request"]["parsed_body"]).encode()
    assert json.loads(ixs[0].request.body) == req
    assert ixs[0].response is not None and ixs[0].response.body == json.dumps(held["response"]["parsed_body"]).encode()
    length = dict((k.lower(), v) for k, v in ixs[0].response.headers)["content-length"]
    assert int(length) == len(ixs[0].response.body)
    assert ixs[1].response is not None and ixs[1].response.body == sse.body
    for i, stream in enumerate((array, sse)):
        assert _show(out, i, capsys) == _recorded_result(stream, tmp_path, capsys)
    # and the request replays to a client that leaves the null field out
    m = Matcher(ixs)
    sent = {"contents": req["contents"]}
    got = m.match("POST", "http://127.0.0.1:1" + sse.path, {}, json.dumps(sent).encode())
    assert got.request.path == sse.path and got.response is not None and got.response.body == sse.body


def test_one_bad_interaction_is_reported_and_the_files_others_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    good = [_vcr_interaction(STREAMS[n], "{}") for n in ("cohere-chat", "azure-chat")]
    bad = _vcr_interaction(STREAMS["mistral-chat"], "{}")
    del bad["response"]["status"]
    doc = {"version": 1, "interactions": [good[0], bad, good[1]]}
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    out = tmp_path / "out.tape"
    code, _, err = _import(capsys, path, "-o", out)
    assert code == 0, err
    assert f"{path}: interaction 1: malformed (no 'status'): left out, the other interactions imported" in err
    assert "Traceback" not in err
    assert [ix.request.path for ix in streamtape.load(out)] == [STREAMS["cohere-chat"].path, STREAMS["azure-chat"].path]


def test_a_file_none_of_whose_interactions_read_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    items = [_vcr_interaction(STREAMS[n], "{}") for n in ("cohere-chat", "azure-chat")]
    for item in items:
        del item["response"]["status"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "interactions": items}, allow_unicode=True))
    code, _, err = _import(capsys, path, "-o", tmp_path / "out.tape")
    assert code == 2
    assert err.strip() == (f"streamtape: error: {path}: interaction 0: malformed (no 'status') "
                           "(and 1 more like it)")
