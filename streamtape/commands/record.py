"""``streamtape record``: run mitmproxy in-process with the recording addon."""

from __future__ import annotations

import asyncio
import sys
from urllib.parse import urlsplit

import click

from ..cassette import Interaction, Outcome
from ..errors import OptionError
from ..fmt import summary_line
from ..record import parse_labels


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    try:
        n = int(port)
    except ValueError:
        raise OptionError(f"--listen {value!r}: expected HOST:PORT") from None
    if not 0 <= n <= 65535:
        raise OptionError(f"--listen {value!r}: port out of range")
    return host, n


def check_upstream(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionError(f"--upstream {url!r}: expected an http:// or https:// URL")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise OptionError(f"--upstream {url!r}: bad port") from None
    return url


@click.command()
@click.option("--upstream", metavar="URL", help="Backend to front (reverse mode), e.g. http://127.0.0.1:8080.")
@click.option("--listen", "listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
              help="Address to listen on (port 0 picks a free one).")
@click.option("-o", "--out", default="streamtape.tape", show_default=True, metavar="FILE",
              help="Cassette to append to.")
@click.option("--mode", type=click.Choice(["reverse", "regular"]), default="reverse", show_default=True,
              help="reverse: front one backend. regular: an HTTP(S) proxy for any app.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Label stored with every interaction.")
@click.option("--all", "record_all", is_flag=True, help="Record every response, not only streaming ones.")
@click.option("--filter", "flow_filter", default="", metavar="EXPR", help="Record only flows matching a mitmproxy filter expression.")
@click.option("--no-redact", is_flag=True, help="Keep API keys, tokens and cookies in the cassette.")
@click.option("--redact-header", multiple=True, metavar="NAME", help="Another header to redact.")
@click.option("--redact-query", multiple=True, metavar="NAME", help="Another query parameter to redact.")
@click.option("--redact-field", multiple=True, metavar="NAME", help="A JSON request-body field to redact.")
@click.option("--confdir", default=None, metavar="DIR", help="mitmproxy's folder (CA certificate), default ~/.mitmproxy.")
@click.option("--insecure", is_flag=True, help="Do not verify upstream TLS certificates (a local backend with a self-signed one).")
def record(
    upstream: str | None,
    listen: str,
    out: str,
    mode: str,
    labels: tuple[str, ...],
    record_all: bool,
    flow_filter: str,
    no_redact: bool,
    redact_header: tuple[str, ...],
    redact_query: tuple[str, ...],
    redact_field: tuple[str, ...],
    confdir: str | None,
    insecure: bool,
) -> None:
    """Record streaming responses through a proxy into a cassette.

    Reverse mode (default) fronts one backend: point the app at the listen
    address (OPENAI_BASE_URL=http://127.0.0.1:8080/v1). Regular mode is an
    HTTP(S) proxy: HTTPS_PROXY=http://127.0.0.1:8080 and trust
    ~/.mitmproxy/mitmproxy-ca-cert.pem. Ctrl-C stops; everything finished is saved.
    """
    # Late: mitmproxy takes most of a second to import, and only this command
    # (of the ones every `streamtape` run registers) needs it.
    from ..mitm import RecordAddon, run_proxy

    host, port = parse_listen(listen)
    parse_labels(labels)  # fail before starting anything
    if mode == "reverse":
        if not upstream:
            raise OptionError("--upstream URL is required in reverse mode")
        spec = f"reverse:{check_upstream(upstream)}"
    else:
        if upstream:
            raise OptionError("--upstream is for reverse mode; regular mode proxies to any host")
        spec = "regular"

    failures: list[str] = []  # before the proxy ran: a bad option
    lost: list[str] = []  # while recording: the cassette stopped taking writes

    def finished(ix: Interaction) -> None:
        line = summary_line(ix)
        if ix.response is None or (ix.response.status == 502 and ix.outcome is not Outcome.COMPLETE):
            line += "  [upstream unreachable: the client got a 502]"
        click.echo(line)

    def failed(message: str) -> None:
        if addon.recorder is not None:
            # Already recording: say it now, and keep proxying for the app.
            click.echo(f"streamtape: error: {message}", err=True)
            lost.append(message)
        else:
            failures.append(message)

    addon = RecordAddon(on_finished=finished, on_error=failed)

    def running(addrs: list[tuple[str, int]]) -> None:
        if failures:
            return
        where = ", ".join(f"{h}:{p}" for h, p in addrs)
        target = f"-> {upstream}" if upstream else "(regular HTTP(S) proxy)"
        click.echo(f"streamtape: recording on {where} {target}, appending to {out}", err=True)
        click.echo("streamtape: Ctrl-C to stop", err=True)

    options: dict[str, str | bool | list[str]] = {
        "streamtape_out": out,
        "streamtape_all": "true" if record_all else "false",
        "streamtape_filter": flow_filter,
        "streamtape_redact": "false" if no_redact else "true",
        "streamtape_redact_headers": list(redact_header),
        "streamtape_redact_query": list(redact_query),
        "streamtape_redact_fields": list(redact_field),
        "streamtape_label": list(labels),
    }
    if confdir:
        options["confdir"] = confdir
    if insecure:
        options["ssl_insecure"] = True

    async def go() -> None:
        await run_proxy(spec, host, port, [addon], on_running=running, options=options)

    asyncio.run(go())
    if failures:
        raise OptionError(failures[0])
    n = addon.saved
    sys.stdout.flush()
    if lost:
        click.echo(f"streamtape: stopped; {out} could not be written, some recordings are lost", err=True)
        sys.exit(1)
    click.echo(f"streamtape: stopped; {n} interaction{'s' if n != 1 else ''} saved to {out}", err=True)


commands = [record]
