"""``streamtape serve``: play cassettes back over HTTP, or as an HTTP(S) proxy with ``--proxy``."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from ..cassette.reader import load_many
from ..errors import OptionError
from ..profiles import parse_profile
from ..wire import ERROR_STATUSES, NO_MATCH_STATUS
from ._common import warn

if TYPE_CHECKING:
    from ..serve import ReplayServer
    from ..serve.workers import WorkerSetup


def _echo(line: str) -> None:
    click.echo(line)
    sys.stdout.flush()


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (any but a loopback address gets a warning).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0 picks a free one).")
@click.option("--profile", default="faithful", show_default=True, metavar="P",
              help="Replay profile (see 'streamtape profiles'); the X-Streamtape-Profile "
                   "request header overrides it per request.")
@click.option("--ignore-field", "ignore_fields", multiple=True, metavar="NAME",
              help="JSON request-body field ignored when matching (repeatable).")
@click.option("--match-header", "match_headers", multiple=True, metavar="NAME",
              help="Request header compared when matching (repeatable).")
@click.option("--strict", is_flag=True,
              help="Running out of recorded repeats of a request is a no-match.")
@click.option("--strict-nulls", is_flag=True,
              help="A JSON null in a recorded request body matches only a null, not an absent "
                   "field (by default the two match: SDKs leave unset options out).")
@click.option("--proxy", is_flag=True,
              help="Run as an HTTP(S) proxy (mitmproxy) that answers matching requests "
                   "from the cassettes.")
@click.option("--passthrough/--refuse-unmatched", "passthrough", default=None,
              help="With --proxy: send unmatched requests upstream (default) or answer them "
                   "with the no-match status.")
@click.option("--no-match-status", default=NO_MATCH_STATUS, show_default=True, metavar="CODE",
              type=click.IntRange(ERROR_STATUSES.start, ERROR_STATUSES.stop - 1),
              help="Status of the answer to a request no recording answers (its body says "
                   "why, in the error shape of the request's API, where SDKs show it). Not "
                   "404, which SDKs report as a missing model, nor a 5xx, which SDKs and "
                   "retry loops send again after a backoff; 404 is the old answer.")
@click.option("--confdir", default=None, metavar="DIR",
              help="With --proxy: mitmproxy's folder (CA certificate), default ~/.mitmproxy.")
@click.option("--max-body", default=None, type=click.IntRange(0), metavar="BYTES",
              help="The longest request body read; a longer one gets a 413 (default 16 MiB).")
@click.option("--client-timeout", default=None, type=click.FloatRange(0, min_open=True),
              metavar="SECONDS",
              help="How long a request may take to arrive, and a client may leave its response "
                   "unread, before its connection is dropped (default 30).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 256),
              metavar="N",
              help="Processes accepting on the port (SO_REUSEPORT; Linux), each with its own "
                   "clock and matcher: the order of repeats and --strict count per worker. The "
                   "log and GET /_streamtape/requests cover all of them.")
def serve(
    paths: tuple[str, ...],
    host: str,
    port: int,
    profile: str,
    ignore_fields: tuple[str, ...],
    match_headers: tuple[str, ...],
    strict: bool,
    strict_nulls: bool,
    proxy: bool,
    passthrough: bool | None,
    no_match_status: int,
    confdir: str | None,
    max_body: int | None,
    client_timeout: float | None,
    workers: int,
) -> None:
    """Replay the cassettes in PATH... (files or folders of .tape files) over HTTP.

    Point the client at the server (OPENAI_BASE_URL=http://127.0.0.1:8000/v1).
    Each request is answered by the matching recording, on the recorded
    timing and chunk boundaries, under the profile. GET /_streamtape/requests
    lists the requests received. One line per request; Ctrl-C stops.
    """
    if not proxy and passthrough is not None:
        raise click.UsageError("--passthrough/--refuse-unmatched only apply with --proxy")
    if not proxy and confdir:
        raise click.UsageError("--confdir only applies with --proxy")
    if proxy and workers > 1:
        raise click.UsageError("--workers does not apply with --proxy")
    # Late: the server package (asyncio, wsproto) is not needed by other commands.
    from ..serve.guard import exposure_warning
    from ..serve.request import CLIENT_TIMEOUT_S, MAX_BODY
    from ..serve.sources import cassette_files

    prof = parse_profile(profile)  # ProfileError: one line, exit 2
    found = cassette_files(paths)  # a folder's cassettes, none from outside it (links followed)
    for skipped in found.skipped:
        click.echo(f"streamtape: warning: {skipped.line()}", err=True)
    cassettes = load_many(found.files)
    warn(cassettes)
    if (exposed := exposure_warning(host)) is not None:
        click.echo(f"streamtape: warning: {exposed}", err=True)
    n = sum(len(c) for c in cassettes)
    if proxy:
        _serve_proxy(tuple(str(f) for f in found.files), host, port, profile, ignore_fields,
                     match_headers, strict, passthrough is not False, confdir, n, no_match_status,
                     strict_nulls)
        return

    # Late: the asyncio server is not needed by other commands.
    from ..serve import ReplayServer
    from ..serve.workers import run_server, serve_workers

    def make_server(port: int, log: Callable[[str], None],
                    worker: WorkerSetup | None = None) -> ReplayServer:
        return ReplayServer(
            cassettes, profile=prof, host=host, port=port, ignore_fields=ignore_fields,
            match_headers=match_headers, strict=strict, strict_nulls=strict_nulls, log=log,
            max_body=MAX_BODY if max_body is None else max_body,
            client_timeout=CLIENT_TIMEOUT_S if client_timeout is None else client_timeout,
            reuse_port=worker is not None,
            journal=worker.journal if worker else None,
            numbers=worker.numbers if worker else None,
            no_match_status=no_match_status,
        )

    def announce(url: str) -> None:
        many = f", {workers} workers" if workers > 1 else ""
        click.echo(
            f"streamtape: replaying {n} interaction{'s' if n != 1 else ''} from "
            f"{', '.join(paths)} on {url} (profile {profile}{many}); Ctrl-C to stop",
            err=True,
        )

    spread = ""
    if workers > 1:
        result = serve_workers(workers, host, port, lambda w: make_server(w.port, w.log, w),
                               on_line=_echo, on_ready=announce)
        served, unmatched = result.served, result.no_match
        spread = f" (by worker: {', '.join(map(str, result.per_worker))})"
    else:
        server = make_server(port, _echo)
        asyncio.run(run_server(server, lambda: announce(server.url)))
        served, unmatched = server.stats.served, server.stats.no_match
    click.echo(f"streamtape: stopped; served {served} request{'s' if served != 1 else ''}, "
               f"{unmatched} unmatched{spread}", err=True)


def _serve_proxy(
    paths: tuple[str, ...], host: str, port: int, profile: str, ignore_fields: tuple[str, ...],
    match_headers: tuple[str, ...], strict: bool, passthrough: bool, confdir: str | None, n: int,
    no_match_status: int = NO_MATCH_STATUS, strict_nulls: bool = False,
) -> None:
    from ..mitm.proxy import run_proxy  # late: mitmproxy is heavy and only --proxy needs it
    from ..mitm.replay import ReplayAddon
    from ..serve.collector import QuietCollector

    failures: list[str] = []
    addon = ReplayAddon(on_line=_echo, on_error=failures.append)
    # mitmproxy's objects per flow make full collections long: keep them off the replay too.
    collector = QuietCollector(lambda: addon.server is not None and addon.server.playing > 0)

    def running(addrs: list[tuple[str, int]]) -> None:
        if failures:
            return
        collector.start()
        where = ", ".join(f"{h}:{p}" for h, p in addrs)
        first = addrs[0]
        click.echo(
            f"streamtape: replay proxy on {where} for {n} interaction{'s' if n != 1 else ''} "
            f"(profile {profile}; unmatched requests "
            f"{'go upstream' if passthrough else f'get {no_match_status}'}); "
            f"HTTPS_PROXY=http://{first[0]}:{first[1]}, trust the mitmproxy CA; Ctrl-C to stop",
            err=True,
        )

    options: dict[str, object] = {
        "streamtape_cassette": list(paths),
        "streamtape_profile": profile,
        "streamtape_ignore_fields": list(ignore_fields),
        "streamtape_match_headers": list(match_headers),
        "streamtape_strict": "true" if strict else "false",
        "streamtape_strict_nulls": "true" if strict_nulls else "false",
        "streamtape_unmatched": "passthrough" if passthrough else "refuse",
        "streamtape_no_match_status": str(no_match_status),
    }
    if confdir:
        options["confdir"] = confdir
    try:
        asyncio.run(run_proxy("regular", host, port, [addon], on_running=running,
                              options=options))
    finally:
        collector.stop()
    if failures:
        raise OptionError(failures[0])
    s = addon.stats
    click.echo(
        f"streamtape: stopped; replayed {s['replayed']}, passed upstream {s['passthrough']}, "
        f"refused {s['refused']}",
        err=True,
    )


commands = [serve]
