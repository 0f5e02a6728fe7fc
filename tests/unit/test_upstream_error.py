"""The sentence a client gets when the recording proxy got no response from its upstream
(:mod:`streamtape.capture.upstream_error`): each cause named, in the words mitmproxy
passes on from the operating system and OpenSSL, and the certificate's way out."""

from __future__ import annotations

import pytest

from streamtape.capture.upstream_error import tls_verification_failed, upstream_error_message

UP = "http://127.0.0.1:8080"


@pytest.mark.parametrize(
    ("error", "says"),
    [
        ("[Errno 111] Connect call failed ('127.0.0.1', 8080)", "could not reach the upstream {up}: connection refused"),
        ("[Errno 61] Connect call failed ('127.0.0.1', 8080)", "could not reach the upstream {up}: connection refused"),
        ("[WinError 10061] No connection could be made because the target machine actively refused it",
         "could not reach the upstream {up}: connection refused"),
        ("[Errno -2] Name or service not known", "could not reach the upstream {up}: its host name does not resolve"),
        ("[Errno 8] nodename nor servname provided, or not known",
         "could not reach the upstream {up}: its host name does not resolve"),
        ("[Errno -3] Temporary failure in name resolution",
         "could not reach the upstream {up}: its host name does not resolve"),
        ("Certificate verify failed: self-signed certificate",
         "could not reach the upstream {up}: its TLS certificate failed verification"),
        ("server closed connection",
         "got no response from the upstream {up}: it closed the connection before sending a response"),
    ],
)
def test_each_cause_is_named_before_the_proxys_own_message(error: str, says: str) -> None:
    message = upstream_error_message(UP, error)
    assert message == f"streamtape's recording proxy {says.format(up=UP)} ({error})"


def test_a_message_nobody_recognises_is_given_as_it_is() -> None:
    assert upstream_error_message(UP, "something new") == (
        f"streamtape's recording proxy got no response from the upstream {UP}: something new"
    )


def test_only_a_certificate_failure_gets_the_hint() -> None:
    hint = "--insecure records from a backend with a self-signed certificate"
    tls = upstream_error_message(UP, "Certificate verify failed: hostname mismatch", insecure_hint=hint)
    assert tls.endswith(f"(Certificate verify failed: hostname mismatch); {hint}")
    assert hint not in upstream_error_message(UP, "[Errno 111] Connect call failed", insecure_hint=hint)
    assert upstream_error_message(UP, "Certificate verify failed: x", insecure_hint=None).endswith("(Certificate verify failed: x)")


@pytest.mark.parametrize(
    ("error", "tls"),
    [
        ("Certificate verify failed: self-signed certificate", True),
        ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate", True),
        ("[Errno 111] Connect call failed ('127.0.0.1', 1)", False),
        (None, False),
        ("", False),
    ],
)
def test_a_certificate_that_failed_verification_is_told_from_other_failures(error: str | None, tls: bool) -> None:
    assert tls_verification_failed(error) is tls
