"""The one rewrite replay makes: absolute URLs in a recorded JSON body that name a recorded
origin point at the replay server (streamtape/serve/links.py)."""

from __future__ import annotations

import json

import httpx

from streamtape.cassette.model import Interaction, Request
from streamtape.serve import ReplayServer
from streamtape.serve.links import Relinker, recorded_origins
from tests.support.builders import interaction

UP = "http://127.0.0.1:41234"
PREDICTION = {"id": "p1", "urls": {"get": f"{UP}/v1/predictions/p1", "stream": f"{UP}/v1/predictions/p1/stream",
                                   "web": "https://replicate.com/p/p1", "other": f"{UP}9/x"}}


def _prediction(pieces: list[bytes], *, content_type: str = "application/json",
                extra: tuple[tuple[str, str], ...] = ()) -> Interaction:
    body = b"".join(pieces)
    return interaction(pieces, content_type=content_type, framing="content-length", status=201,
                       extra_headers=(("Content-Length", str(len(body))), *extra),
                       url=f"{UP}/v1/models/o/m/predictions")


def _body(ix: Interaction) -> bytes:
    assert ix.response is not None
    return b"".join(p.data for p in ix.response.pieces)


def test_origins_are_each_recorded_requests_url_and_host_header() -> None:
    reqs = [Request("POST", f"{UP}/a", headers=(("Host", "api.example.test"),)),
            Request("GET", "https://Stream.Example.test/v1/files/x")]
    assert recorded_origins(reqs) == {UP, "http://api.example.test", "https://stream.example.test"}


def test_a_recorded_origin_that_begins_a_url_in_a_json_body_becomes_the_serving_origin() -> None:
    raw = json.dumps(PREDICTION).encode()
    ix = _prediction([raw[:40], raw[40:90], raw[90:]])  # an origin cut across two pieces
    out = Relinker([UP]).relink(ix, "http://127.0.0.1:8000")
    doc = json.loads(_body(out))
    assert doc["urls"]["get"] == "http://127.0.0.1:8000/v1/predictions/p1"
    assert doc["urls"]["stream"] == "http://127.0.0.1:8000/v1/predictions/p1/stream"
    assert doc["urls"]["web"] == "https://replicate.com/p/p1"  # not a recorded origin
    assert doc["urls"]["other"] == f"{UP}9/x"  # another port: not the origin, though it starts the same
    assert out.response is not None and ix.response is not None
    assert [p.at_ns for p in out.response.pieces] == [p.at_ns for p in ix.response.pieces]
    assert out.response.header("content-length") == str(len(_body(out)))


def test_a_stream_a_compressed_body_and_a_request_at_a_recorded_origin_are_left_as_recorded() -> None:
    raw = json.dumps(PREDICTION).encode()
    relinker = Relinker([UP])
    sse = interaction([b"data: " + raw + b"\n\n"])
    gz = _prediction([raw], extra=(("Content-Encoding", "gzip"),))
    plain = _prediction([raw])
    assert relinker.relink(sse, "http://127.0.0.1:8000") is sse
    assert relinker.relink(gz, "http://127.0.0.1:8000") is gz
    assert relinker.relink(plain, UP) is plain
    assert relinker.relink(plain, "http://127.0.0.1:8000") is relinker.relink(plain, "http://127.0.0.1:8000")


def test_serve_answers_the_recorded_prediction_with_urls_on_itself_and_the_right_length() -> None:
    raw = json.dumps(PREDICTION).encode()
    with ReplayServer([_prediction([raw])], profile="instant") as server:
        r = httpx.post(f"{server.url}/v1/models/o/m/predictions", content=b'{"stream": true}',
                       headers={"content-type": "application/json"})
    assert r.status_code == 201
    assert r.json()["urls"]["stream"] == f"{server.url}/v1/predictions/p1/stream"
    assert int(r.headers["content-length"]) == len(r.content)
