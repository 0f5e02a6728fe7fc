"""The request a rerun sends for a recorded one. Pure code: the shadow's rewrite, reused.

A rerun's backend is a shadow that comes later: the recorded request is sent
to it with the very rules :mod:`streamtape.shadow.rewrite` applies to a
shadow (the origin replaced, connection and framing headers left to the
client, the recorded credentials never passed on, ``--header`` values set and
never stored, ``--model`` and ``--path /FROM=/TO`` with the OpenAI chat <->
Ollama chat body mapping of :mod:`streamtape.shadow.chat_mapping`). The
rerun's options build a :class:`~streamtape.shadow.ShadowTarget`
(:func:`build_target`), and :func:`rerun_request` sends through
:func:`~streamtape.shadow.shadow_request`.

One rule is the rerun's own: a recording keeps ``REDACTED`` where a secret
was, and that word must never reach the new backend as if it were the
value. A request with a redacted header (``Authorization: REDACTED``) or
query parameter needs ``--header NAME=VALUE`` for it (``--header NAME=``
sends none), or it is refused before anything is sent
(:class:`~streamtape.errors.RedactedValueError`, naming the header).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from ..cassette.model import REDACTED, Request
from ..errors import OptionError, RedactedValueError
from ..shadow.rewrite import CREDENTIAL_QUERY, ShadowRequest, shadow_request
from ..shadow.targets import PathMap, ShadowTarget, backend_url
from ..wire import TOKEN


@dataclass(frozen=True)
class RequestMap:
    """What ``--header``, ``--model`` and ``--path`` ask of every request (parsed)."""

    headers: tuple[tuple[str, str], ...] = ()
    model: str | None = None
    paths: tuple[PathMap, ...] = ()


def parse_map(headers: Sequence[str] = (), model: str | None = None, paths: Sequence[str] = ()) -> RequestMap:
    """``NAME=VALUE`` headers and ``/FROM=/TO`` paths; :class:`OptionError` names a bad one."""
    parsed: list[tuple[str, str]] = []
    for item in headers:
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not TOKEN.fullmatch(name):
            raise OptionError(f"--header {item!r}: expected NAME=VALUE (NAME= sends no such header)")
        parsed.append((name, value))
    maps: list[PathMap] = []
    for item in paths:
        source, eq, target = item.partition("=")
        if not eq or not source.startswith("/") or not target.startswith("/"):
            raise OptionError(f"--path {item!r}: expected /FROM=/TO (two paths)")
        maps.append(PathMap(source, target))
    if model is not None and not model.strip():
        raise OptionError("--model: expected a model name")
    return RequestMap(tuple(parsed), model, tuple(maps))


def build_target(upstream: str, name: str, request_map: RequestMap) -> ShadowTarget:
    """The new backend as the shadow rewrite knows one."""
    url = backend_url("--upstream", upstream)
    return ShadowTarget.at(url, name, request_map.headers, request_map.model, request_map.paths)


def redacted_value(target: ShadowTarget, request: Request) -> tuple[str, str] | None:
    """The first redacted value the request would need and ``--header`` does not give:
    ``("header", NAME)`` or ``("query", NAME)``; None when there is none."""
    given = {name.lower() for name, _ in target.headers}
    for name, value in request.headers:
        if value == REDACTED and name.lower() not in given:
            return ("header", name)
    query = urlsplit(request.url).query
    for name, value in parse_qsl(query, keep_blank_values=True):
        if value == REDACTED and name not in CREDENTIAL_QUERY:
            return ("query", name)
    return None


def check_sendable(target: ShadowTarget, request: Request, label: str) -> None:
    """:class:`RedactedValueError` when ``request`` holds a redacted value it would need."""
    found = redacted_value(target, request)
    if found is not None:
        raise RedactedValueError(label, *found)


def rerun_request(target: ShadowTarget, request: Request) -> ShadowRequest:
    """The request sent to the new backend for a recorded one (the shadow's rules);
    :class:`~streamtape.shadow.Unmappable` when a ``--path`` body mapping cannot be done."""
    return shadow_request(target, request)
