"""What the recorder says of a request the upstream never answered: pure text, no proxy.

The recording proxy cannot always reach its upstream: the connection is
refused, the host name does not resolve, the upstream's TLS certificate fails
verification, or the upstream closes (or resets) the connection before it
sends a response head. The client is then answered by the proxy itself (a
502), and the cassette keeps the interaction as ``upstream_error`` with the
proxy's own message (mitmproxy's, which is the operating system's or
OpenSSL's: ``[Errno 111] Connect call failed ('127.0.0.1', 9)``).

That message is accurate but does not say *who* failed to reach *what*, and a
client behind the proxy cannot tell a dead backend from a dead proxy. So
:func:`upstream_error_message` puts it in a sentence that names the recording
proxy, the upstream and the cause (and, for a certificate, the way out); the
proxy sends that sentence in the error body the API's SDKs read
(:func:`streamtape.wire.error_body`), so ``openai.InternalServerError`` and
its siblings print it. The cassette and the ``record`` line keep mitmproxy's
message, unchanged.

The causes are told apart by the wording the messages have on Linux, macOS
and Windows (errno names and numbers differ, the Python and OpenSSL texts do
not); a message nobody recognises still gets the sentence, with the message
as its cause.
"""

from __future__ import annotations

import re

__all__ = ["tls_verification_failed", "upstream_error_message"]

_TLS_VERIFY = re.compile(r"certificate verify failed|CERTIFICATE_VERIFY_FAILED|self[- ]signed certificate"
                         r"|unable to get local issuer|hostname mismatch|certificate is not valid", re.I)
"""How OpenSSL (through mitmproxy) words an upstream certificate it could not verify."""

_REFUSED = re.compile(r"connect call failed|connection refused|ECONNREFUSED|actively refused", re.I)
"""A refused connection: asyncio's "Connect call failed" (errno 111 on Linux, 61 on macOS), or the OS's words."""

_NO_NAME = re.compile(
    r"name or service not known|nodename nor servname|temporary failure in name resolution"
    r"|no address associated with hostname|getaddrinfo failed|name resolution",
    re.I,
)
"""A host name that does not resolve (getaddrinfo's messages on glibc, macOS and Windows)."""

_CLOSED = re.compile(r"server closed connection|connection reset|ECONNRESET|connection aborted", re.I)
"""An upstream that closed or reset the connection before its response head."""


def tls_verification_failed(error: str | None) -> bool:
    """The upstream's TLS certificate failed verification (not a refused or lost connection)."""
    return bool(error) and _TLS_VERIFY.search(error or "") is not None


def upstream_error_message(upstream: str, error: str, *, insecure_hint: str | None = None,
                           proxy: str = "recording proxy") -> str:
    """One sentence for a client whose request the upstream never answered.

    ``upstream`` names it (``http://127.0.0.1:8080``), ``error`` is the
    proxy's message for the failure, and ``insecure_hint`` the way to accept a
    certificate that failed verification, in the words of the program the
    user started (``--insecure`` for ``streamtape record``; None: nothing to
    suggest). ``proxy`` says which of streamtape's proxies it was (``replay proxy``
    for a request ``serve --proxy`` passed on).
    """
    verb = "could not reach"
    if tls_verification_failed(error):
        cause = "its TLS certificate failed verification"
    elif _REFUSED.search(error):
        cause = "connection refused"
    elif _NO_NAME.search(error):
        cause = "its host name does not resolve"
    elif _CLOSED.search(error):
        verb, cause = "got no response from", "it closed the connection before sending a response"
    else:
        verb, cause = "got no response from", ""
    message = f"streamtape's {proxy} {verb} the upstream {upstream}: "
    message += f"{cause} ({error})" if cause else error
    if insecure_hint and tls_verification_failed(error):
        message += f"; {insecure_hint}"
    return message
