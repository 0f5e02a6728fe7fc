"""Credentials left in request bodies: found, reported once per field, with the option that removes them
(the warning of the real ``streamtape record``: tests/system/test_credentials.py)."""

from __future__ import annotations

import json

import pytest

from streamtape.capture.credentials import (
    Credential,
    CredentialKind,
    find_credentials,
    looks_secret_name,
)
from streamtape.capture.recorder import Recorder
from streamtape.capture.redaction import Redaction
from streamtape.cassette.model import REDACTED, Outcome, Request
from streamtape.cassette.records import Record

SK = "sk-proj-" + "aB3dE5fG7hJ9kL1mN3pQ5r"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
HEX = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
B64 = "QWxhZGRpbjpvcGVuIHNlc2FtZTEyMzQ1Njc4OTA"


def body(doc: object) -> bytes:
    return json.dumps(doc).encode()


def found(doc: object, content_type: str | None = "application/json") -> list[tuple[str, str, CredentialKind]]:
    return [(c.path, c.field, c.kind) for c in find_credentials(body(doc), content_type)]


def test_secret_keys_and_jwts_are_found_in_fields_of_any_name() -> None:
    doc = {"model": "gpt", "config": {"openai": SK}, "session": [{"blob": JWT}]}
    assert found(doc) == [
        ("config.openai", "openai", CredentialKind.SECRET_KEY),
        ("session[0].blob", "blob", CredentialKind.JWT),
    ]


def test_long_hex_and_base64_tokens_count_only_in_fields_named_like_secrets() -> None:
    doc = {
        "api_key": HEX,
        "accessToken": B64,
        "client_secret": "Bearer " + B64,
        "user_id": HEX,  # an id, not a secret
        "prompt_hash": B64,
        "keywords": B64,  # "keywords" is not the word "key"
    }
    assert found(doc) == [
        ("api_key", "api_key", CredentialKind.HEX_TOKEN),
        ("accessToken", "accessToken", CredentialKind.BASE64_TOKEN),
        ("client_secret", "client_secret", CredentialKind.BASE64_TOKEN),
    ]


@pytest.mark.parametrize(
    "doc",
    [
        {"model": "m", "max_tokens": 512, "messages": [{"role": "user", "content": f"is {SK[:10]} a key?"}]},
        {"token": "short", "api_key": "not-a-secret-at-all-just-words"},
        {"idempotency_key": "123e4567-e89b-12d3-a456-426614174000"},  # a UUID is an id
        {"api_key": REDACTED},
        [SK],  # no field names it: nothing --redact-field could remove
    ],
)
def test_ordinary_llm_request_bodies_have_no_credentials(doc: object) -> None:
    assert found(doc) == []


def test_a_body_that_is_neither_json_nor_a_form_is_not_searched() -> None:
    assert find_credentials(f"api_key={SK}".encode(), "text/plain") == []
    assert find_credentials(f"api_key={SK}".encode(), "application/x-www-form-urlencoded") == [
        Credential("api_key", "api_key", CredentialKind.SECRET_KEY)]
    assert find_credentials(b'{"api_key": "' + SK.encode() + b'"', "application/json") == []  # cut short
    assert find_credentials(body({"k": SK}), None) == [Credential("k", "k", CredentialKind.SECRET_KEY)]


@pytest.mark.parametrize(
    ("name", "secret"),
    [("api_key", True), ("apiKey", True), ("X-API-KEY", True), ("refresh_token", True), ("password", True),
     ("auth", True), ("max_tokens", False), ("keywords", False), ("monkey", False), ("author", False)],
)
def test_secret_like_names_go_by_their_words(name: str, secret: bool) -> None:
    assert looks_secret_name(name) is secret


def recorder(seen: list[Credential], redaction: Redaction | None = None) -> tuple[Recorder, list[Record]]:
    records: list[Record] = []
    ids = iter(range(100))
    return Recorder(records.extend, lambda: next(ids), redaction=redaction, on_credential=seen.append), records


def chat_request(doc: object) -> Request:
    return Request("POST", "https://api.test/v1/chat/completions", headers=(("content-type", "application/json"),),
                   body=body(doc))


def test_the_recorder_reports_each_field_once_and_only_what_redaction_left() -> None:
    seen: list[Credential] = []
    rec, records = recorder(seen, Redaction.build(body_fields=["token"]))
    doc = {"auth": {"api_key": SK, "token": JWT}, "model": "m"}
    for n in range(3):
        rec.begin(n, chat_request(doc), 0)
        rec.response_headers(n, 200, "OK", "HTTP/1.1", (("content-type", "text/event-stream"),), 1)
        rec.finish(n, Outcome.COMPLETE, None, 2)
    assert seen == [Credential("auth.api_key", "api_key", CredentialKind.SECRET_KEY)]
    begins = [r for r in records if isinstance(r, dict) and r["t"] == "begin"]
    assert len(begins) == 3
    assert all(json.loads(b["request"]["body"])["auth"]["token"] == REDACTED for b in begins)


def test_the_recorder_says_nothing_when_redaction_is_off() -> None:
    seen: list[Credential] = []
    rec, _ = recorder(seen, Redaction.build(enabled=False))
    rec.begin(0, chat_request({"api_key": SK}), 0)
    rec.finish(0, Outcome.UPSTREAM_ERROR, "refused", 1)  # no response head: reported at the end
    assert seen == []
