"""Shadow targets: the backends a recorded request is mirrored to, named, and their rewrites.

Built once from the ``streamtape record`` options, then read by the sender
and the rewriter; no I/O. A backend is referred to on the command line (in
``--shadow-header B:...``, ``--shadow-model B=...``, ``--shadow-path B:...``,
``--label-backend B=name``) by its URL as given, its ``host:port``, its host
alone when that is unambiguous, or the name ``--label-backend`` gave it. The
name a recording carries in its ``backend`` label is that name, or else the
backend's ``host:port`` as written in its URL (``api.openai.com``,
``127.0.0.1:8001``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..errors import OptionError
from ..wire import TOKEN
from .chat_mapping import ChatApi, api_of_path

DEFAULT_MAX_IN_FLIGHT = 16
"""Shadow requests in flight per shadow before more are skipped (and counted)."""
DEFAULT_TIMEOUT_S = 300.0
"""How long one shadow request may take, from send to the end of its body."""


@dataclass(frozen=True)
class PathMap:
    """``--shadow-path B:FROM=TO``: a request for path FROM goes to the shadow's TO.

    When FROM and TO are the chat endpoints of two APIs (OpenAI's
    ``/v1/chat/completions`` and Ollama's ``/api/chat``), the body is rewritten
    as the other API's (:mod:`streamtape.shadow.chat_mapping`)."""

    source: str
    target: str

    @property
    def translation(self) -> tuple[ChatApi, ChatApi] | None:
        a, b = api_of_path(self.source), api_of_path(self.target)
        if a is None or b is None or a == b:
            return None
        return (a, b)


@dataclass(frozen=True)
class ShadowTarget:
    """One shadow backend and how a request is rewritten for it."""

    url: str
    """As given on the command line."""
    origin: str
    """``scheme://host:port``."""
    prefix: str
    """A path the URL carries (``https://api.example.com/openai``), put before the request's."""
    name: str
    """The ``backend`` label of its recordings."""
    headers: tuple[tuple[str, str], ...] = ()
    """``--shadow-header`` overrides: set (or, with an empty value, removed) on
    every request to this shadow; their values never reach a cassette."""
    model: str | None = None
    """``--shadow-model``: the JSON body's top-level ``model`` is replaced by this."""
    paths: tuple[PathMap, ...] = ()

    @classmethod
    def at(
        cls,
        url: str,
        name: str,
        headers: Sequence[tuple[str, str]] = (),
        model: str | None = None,
        paths: Sequence[PathMap] = (),
    ) -> ShadowTarget:
        """The target for a checked URL (:func:`backend_url`): its origin and path prefix
        taken from it. The shadow plan and the rerun's backend are both built here."""
        parts = urlsplit(url)
        return cls(
            url=url,
            origin=f"{parts.scheme}://{parts.netloc}",
            prefix=parts.path.rstrip("/"),
            name=name,
            headers=tuple(headers),
            model=model,
            paths=tuple(paths),
        )

    def path_map(self, path: str) -> PathMap | None:
        return next((m for m in self.paths if m.source == path), None)


@dataclass(frozen=True)
class ShadowPlan:
    """Every shadow of one recording run, and how the primary side is named."""

    targets: tuple[ShadowTarget, ...]
    primary_name: str | None = None
    """The upstream's name in reverse mode; None in regular mode (each request's host)."""
    host_names: Mapping[str, str] = field(default_factory=dict)
    """``--label-backend HOST=name`` for hosts a regular proxy meets (by ``host:port`` or host)."""
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    timeout_s: float = DEFAULT_TIMEOUT_S
    verify: bool = True
    """Verify shadows' TLS certificates (``--insecure`` turns it off, as for the upstream)."""

    def primary_backend(self, url: str) -> str:
        """The ``backend`` label of a primary recording of ``url``."""
        if self.primary_name is not None:
            return self.primary_name
        netloc = _netloc(url)
        host = urlsplit(url).hostname or netloc
        return self.host_names.get(netloc) or self.host_names.get(host) or netloc


def _with_scheme(url: str) -> str:
    return url if "://" in url else f"http://{url}"


def _netloc(url: str) -> str:
    return urlsplit(url).netloc.rpartition("@")[2]


def backend_url(option: str, url: str, *, path: bool = True) -> str:
    """A backend's URL as given to ``option`` (``http://`` put before a bare HOST:PORT);
    :class:`OptionError`, naming the flag the user typed, for another scheme, no host, a
    bad port, a query or fragment, or (``path=False``) a path.

    The one check of a backend URL a user gives: ``record --upstream`` (an origin:
    mitmproxy's reverse mode fronts a whole server and takes no path, and would stop
    with a traceback on one), ``record --shadow`` and ``rerun --upstream`` (a path is
    the prefix each request's path goes under).
    """
    parts = urlsplit(_with_scheme(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionError(f"{option} {url!r}: expected an http:// or https:// URL (or HOST:PORT)")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise OptionError(f"{option} {url!r}: bad port") from None
    if parts.query or parts.fragment:
        raise OptionError(f"{option} {url!r}: takes no query or fragment")
    if not path and parts.path not in ("", "/"):
        raise OptionError(f"{option} {url!r}: takes no path; give scheme://host[:port] "
                          "(each request keeps its own path)")
    return _with_scheme(url)


@dataclass
class _Backend:
    """A backend while the options are read: what it may be called, and its settings."""

    url: str
    refs: set[str]
    name: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    model: str | None = None
    paths: list[PathMap] = field(default_factory=list)


def _refs(url: str) -> set[str]:
    parts = urlsplit(url)
    return {url, url.rstrip("/"), _netloc(url), parts.hostname or ""} - {""}


def _find(backends: Sequence[_Backend], ref: str, option: str, item: str) -> _Backend:
    ref = ref.strip()
    named = [b for b in backends if b.name == ref]
    found = named or [b for b in backends if ref in b.refs or _with_scheme(ref).rstrip("/") in b.refs]
    if len(found) == 1:
        return found[0]
    known = ", ".join(b.name or _netloc(b.url) for b in backends)
    if not found:
        raise OptionError(f"{option} {item!r}: no backend {ref!r} (known: {known})")
    raise OptionError(f"{option} {item!r}: {ref!r} names more than one backend ({known}); use host:port or the URL")


def _split_ref(option: str, item: str, sep: str) -> tuple[str, str]:
    """``B<sep>rest``; B may hold colons (a URL), so the split is at the last ``sep``
    before the first ``=``."""
    left, eq, right = item.partition("=")
    if sep == "=":
        ref, _, value = item.rpartition("=")
        if not ref or not value:
            raise OptionError(f"{option} {item!r}: expected BACKEND=VALUE")
        return ref, value
    ref, colon, name = left.rpartition(sep)
    if not eq or not colon or not ref or not name:
        raise OptionError(f"{option} {item!r}: expected BACKEND{sep}NAME=VALUE")
    return ref, f"{name}={right}"


def build_plan(
    *,
    upstream: str | None,
    shadows: Sequence[str],
    headers: Sequence[str] = (),
    models: Sequence[str] = (),
    paths: Sequence[str] = (),
    label_backends: Sequence[str] = (),
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    verify: bool = True,
) -> ShadowPlan:
    """The plan for ``--shadow`` and its companions; :class:`OptionError` names the bad item."""
    if max_in_flight < 1:
        raise OptionError(f"--shadow-max-in-flight {max_in_flight}: must be at least 1")
    if not timeout_s > 0:
        raise OptionError(f"--shadow-timeout {timeout_s}: must be more than 0 seconds")
    if not shadows:
        extra = [
            o
            for o, v in (
                ("--shadow-header", headers),
                ("--shadow-model", models),
                ("--shadow-path", paths),
                ("--label-backend", label_backends),
            )
            if v
        ]
        raise OptionError(f"{extra[0] if extra else 'a shadow plan'} needs a --shadow to apply to")
    shadow_backends = [_Backend(u, _refs(u)) for u in (backend_url("--shadow", s) for s in shadows)]
    primary_url = backend_url("--upstream", upstream) if upstream else None
    primary = _Backend(primary_url, _refs(primary_url)) if primary_url else None
    everyone = ([primary] if primary else []) + shadow_backends
    host_names: dict[str, str] = {}
    for item in label_backends:
        ref, name = _split_ref("--label-backend", item, "=")
        if primary is None and not any(ref.strip() in b.refs for b in everyone):
            host_names[ref.strip()] = name.strip()  # a host the regular proxy will meet
            continue
        _find(everyone, ref, "--label-backend", item).name = name.strip()
    for b in everyone:
        b.name = b.name or _netloc(b.url)
    names = [b.name for b in everyone]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise OptionError(f"two backends are both named {dup!r}; name them apart with --label-backend B=NAME")
    for item in headers:
        ref, rest = _split_ref("--shadow-header", item, ":")
        hname, _, value = rest.partition("=")
        if not TOKEN.fullmatch(hname):
            raise OptionError(f"--shadow-header {item!r}: {hname!r} is not a header name")
        _find(shadow_backends, ref, "--shadow-header", item).headers.append((hname, value))
    for item in models:
        ref, model = _split_ref("--shadow-model", item, "=")
        _find(shadow_backends, ref, "--shadow-model", item).model = model
    for item in paths:
        ref, rest = _split_ref("--shadow-path", item, ":")
        source, _, target = rest.partition("=")
        if not source.startswith("/") or not target.startswith("/"):
            raise OptionError(f"--shadow-path {item!r}: expected BACKEND:/FROM=/TO (two paths)")
        _find(shadow_backends, ref, "--shadow-path", item).paths.append(PathMap(source, target))
    targets = tuple(
        ShadowTarget.at(b.url, b.name or _netloc(b.url), b.headers, b.model, b.paths) for b in shadow_backends
    )
    return ShadowPlan(
        targets=targets,
        primary_name=primary.name if primary else None,
        host_names=host_names,
        max_in_flight=max_in_flight,
        timeout_s=timeout_s,
        verify=verify,
    )
