"""Matching and redaction for hosted providers' requests (issue 20): a JSON ``null`` against an
absent field, the headers of a signed call, and the secrets Gemini and AWS send."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import streamtape
from streamtape import Interaction, NoMatchError, Request, Response
from streamtape.capture.redaction import Redaction
from streamtape.cassette.digest import request_digest
from streamtape.cassette.writer import CassetteWriter
from streamtape.match.indexed import CassetteChain, IndexedMatcher
from streamtape.match.matcher import Matcher

URL = "http://127.0.0.1:11434/api/chat"


def rec(body: object, *, url: str = URL, headers: tuple[tuple[str, str], ...] = (), tag: str = "a") -> Interaction:
    return Interaction(Request("POST", url, headers=headers, body=json.dumps(body).encode()), Response(200),
                       labels={"tag": tag})


def ask(m: Matcher, body: object, *, url: str = URL, headers: dict[str, str] | None = None) -> str:
    return m.match("POST", url, headers or {}, json.dumps(body).encode()).labels["tag"]


OLLAMA = {"model": "llama3", "messages": [{"role": "user", "content": "hi", "images": None}], "keep_alive": None}
SENT = {"model": "llama3", "messages": [{"role": "user", "content": "hi"}]}


def test_a_recorded_null_matches_an_absent_field_at_any_depth():
    assert ask(Matcher([rec(OLLAMA)]), SENT) == "a"


def test_a_null_sent_matches_a_field_the_recording_lacks():
    assert ask(Matcher([rec(SENT)]), {**SENT, "options": None}) == "a"


def test_a_recorded_null_still_differs_from_a_value():
    with pytest.raises(NoMatchError, match="body keep_alive is \"5m\", recorded null"):
        ask(Matcher([rec(OLLAMA)]), {**SENT, "keep_alive": "5m"})


def test_strict_nulls_tells_a_null_from_an_absent_field():
    m = Matcher([rec(OLLAMA)], strict_nulls=True)
    with pytest.raises(NoMatchError, match="lacks keep_alive \\(recorded null\\)"):
        ask(m, SENT)
    assert ask(m, OLLAMA) == "a"


def test_a_null_in_a_list_holds_its_place():
    with pytest.raises(NoMatchError):
        ask(Matcher([rec({"stop": [None, "x"]})]), {"stop": ["x"]})


def test_request_digests_agree_for_a_null_and_an_absent_field():
    a = request_digest("POST", URL, json.dumps(OLLAMA).encode())
    assert a == request_digest("POST", URL, json.dumps(SENT).encode(), recorded=False)


def test_the_indexed_matcher_of_a_large_cassette_answers_nulls_as_the_matcher_does(tmp_path: Path):
    path = tmp_path / "many.tape"
    with CassetteWriter(path, index_min_bytes=0) as w:  # an index record with the digests
        for n in range(30):
            w.add(rec({**OLLAMA, "seed": n}, tag=str(n)))
    chain = CassetteChain([streamtape.load(path)])
    assert chain.stored_digests() is not None  # the writer's digests, version 2
    m = IndexedMatcher(chain)
    assert ask(m, {**SENT, "seed": 7}) == "7"
    with pytest.raises(NoMatchError):
        ask(IndexedMatcher(chain, strict_nulls=True), {**SENT, "seed": 7})


SIGNED = (("X-Amz-Date", "20261202T044345Z"), ("X-Amz-Content-Sha256", "e3b0c442"),
          ("Authorization", "REDACTED"), ("amz-sdk-invocation-id", "71ebaf36"),
          ("amz-sdk-request", "attempt=1; max=3"), ("X-Amz-Security-Token", "REDACTED"),
          ("Content-Type", "application/json"))


def test_headers_of_a_signed_call_never_take_part_even_when_named():
    bedrock = "http://127.0.0.1/model/anthropic.claude-v2%3A1/converse-stream"
    named = [k for k, _ in SIGNED]
    m = Matcher([rec({"messages": []}, url=bedrock, headers=SIGNED)], match_headers=named)
    fresh = {"X-Amz-Date": "20261203T000000Z", "X-Amz-Content-Sha256": "ffff", "Authorization": "AWS4 other",
             "amz-sdk-invocation-id": "new", "amz-sdk-request": "attempt=2; max=3",
             "X-Amz-Security-Token": "other", "Content-Type": "application/json"}
    assert ask(m, {"messages": []}, url=bedrock, headers=fresh) == "a"
    with pytest.raises(NoMatchError, match="header content-type"):
        ask(m, {"messages": []}, url=bedrock, headers={**fresh, "Content-Type": "text/plain"})


def test_gemini_and_aws_secrets_are_redacted_by_default():
    r = Request(
        "POST", "https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent?alt=sse&key=AIzaSECRET",
        headers=(("x-goog-api-key", "AIzaSECRET"), ("X-Amz-Security-Token", "FwoGZXIvYXdzEJr"),
                 ("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261202/us-east-1/bedrock/aws4_request, "
                                   "SignedHeaders=host;x-amz-date, Signature=62ba9e"),
                 ("api-key", "azure-key"), ("X-Amz-Date", "20261202T044345Z")),
        body=b"{}",
    )
    out = Redaction().request(r)
    assert "AIzaSECRET" not in out.url and "key=REDACTED" in out.url and "alt=sse" in out.url
    assert dict(out.headers) == {"x-goog-api-key": "REDACTED", "X-Amz-Security-Token": "REDACTED",
                                 "Authorization": "REDACTED", "api-key": "REDACTED",
                                 "X-Amz-Date": "20261202T044345Z"}


def test_a_redacted_gemini_key_matches_any_key_and_none():
    url = "http://127.0.0.1/v1beta/models/g:streamGenerateContent?alt=sse&key=REDACTED"
    m = Matcher([rec({"contents": []}, url=url)])
    assert ask(m, {"contents": []}, url=url.replace("REDACTED", "AIzaOTHER")) == "a"
    assert ask(m, {"contents": []}, url=url.replace("&key=REDACTED", "")) == "a"
