"""Form-urlencoded request bodies: redacted at record time, matched and digested as fields."""

from __future__ import annotations

import pytest

from streamtape.capture.redaction import REDACTED, Redaction
from streamtape.cassette.digest import WILDCARD, request_digest
from streamtape.cassette.model import Interaction, Request, Response
from streamtape.errors import NoMatchError
from streamtape.match.matcher import Matcher

FORM = "application/x-www-form-urlencoded"
IAM = b"grant_type=urn%3Aibm%3Aparams%3Aoauth%3Agrant-type%3Aapikey&apikey=wx-secret"
URL = "https://iam.test/identity/token"


def _request(body: bytes, content_type: str = FORM) -> Request:
    return Request("POST", URL, headers=(("Content-Type", content_type),), body=body)


def test_the_iam_api_key_in_a_form_body_is_redacted_and_the_rest_kept_byte_for_byte():
    got = Redaction().redact_body(IAM, FORM)
    assert got == b"grant_type=urn%3Aibm%3Aparams%3Aoauth%3Agrant-type%3Aapikey&apikey=REDACTED"


def test_oauth_credential_fields_are_redacted_in_the_order_sent_with_a_charset_parameter():
    body = b"client_secret=s1&grant_type=refresh_token&refresh_token=r%2B1&client_id=app&code=abc"
    got = Redaction().redact_body(body, FORM + "; charset=utf-8")
    assert got == b"client_secret=REDACTED&grant_type=refresh_token&refresh_token=REDACTED&client_id=app&code=abc"


def test_a_user_named_field_is_redacted_in_form_bodies_as_in_json():
    r = Redaction.build(body_fields=["code"])
    assert r.redact_body(b"code=abc&state=1", FORM) == b"code=REDACTED&state=1"
    assert r.redact_body(b'{"code": "abc"}', "application/json") == b'{"code": "REDACTED"}'


def test_no_redact_keeps_the_form_body_and_other_content_types_are_not_read_as_forms():
    assert Redaction(enabled=False).redact_body(IAM, FORM) == IAM
    assert Redaction().redact_body(b"apikey=x", "text/plain") == b"apikey=x"


def _recorded(body: bytes) -> Interaction:
    return Interaction(_request(Redaction().redact_body(body, FORM)), Response(200, "OK"))


def test_a_recorded_redacted_form_value_matches_any_key_and_fields_in_any_order():
    m = Matcher([_recorded(IAM)])
    assert m.match("POST", URL, [("content-type", FORM)], b"apikey=another&grant_type="
                   b"urn%3Aibm%3Aparams%3Aoauth%3Agrant-type%3Aapikey") is not None


def test_a_form_body_that_differs_in_a_kept_field_does_not_match_and_says_which():
    m = Matcher([_recorded(IAM)])
    with pytest.raises(NoMatchError, match="form field grant_type=\"password\""):
        m.match("POST", URL, [("content-type", FORM)], b"grant_type=password&apikey=x")


def test_a_recorded_redacted_form_body_digests_as_a_wildcard_and_equal_forms_alike():
    redacted = Redaction().redact_body(IAM, FORM)
    assert REDACTED.encode() in redacted
    assert request_digest("POST", URL, redacted, content_type=FORM) == WILDCARD
    a = request_digest("POST", URL, b"a=1&b=x+y", content_type=FORM)
    assert a == request_digest("POST", URL, b"b=x%20y&a=1", content_type=FORM, recorded=False)
    assert a != request_digest("POST", URL, b"b=x%20y&a=2", content_type=FORM, recorded=False)
    assert request_digest("POST", URL, b"a=1&b=x+y") != request_digest("POST", URL, b"b=x%20y&a=1")


def test_a_credential_left_in_a_form_body_is_reported_and_a_redacted_one_is_not():
    from streamtape.capture.credentials import CredentialKind, find_credentials

    body = Redaction().redact_body(b"apikey=wx-secret&session_key=0123456789abcdef0123456789abcdef&q=1", FORM)
    found = find_credentials(body, FORM)
    assert [(c.field, c.kind) for c in found] == [("session_key", CredentialKind.HEX_TOKEN)]


def test_json_sent_under_the_form_label_is_matched_and_digested_as_json():
    # curl -d and Python's urllib label every body form-urlencoded, JSON included.
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    recorded = Interaction(Request("POST", URL, headers=(("Content-Type", "application/json"),), body=body),
                           Response(200, "OK"))
    spaced = b'{"messages": [{"content": "hi", "role": "user"}], "model": "m"}'
    assert Matcher([recorded]).match("POST", URL, [("content-type", FORM)], spaced) is not None
    assert request_digest("POST", URL, body, content_type="application/json") == request_digest(
        "POST", URL, spaced, content_type=FORM, recorded=False)
