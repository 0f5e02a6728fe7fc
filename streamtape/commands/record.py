"""``streamtape record``: run mitmproxy in-process with the recording addon."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import click

from ..capture.credentials import Credential
from ..capture.recorder import parse_labels
from ..cassette.model import Interaction, Outcome
from ..errors import OptionError
from ..fmt import summary_line
from ..shadow import ShadowPlan, ShadowTarget, build_plan
from ..shadow.labels import SESSION_LABELS

if TYPE_CHECKING:
    from ..shadow.sender import TargetCounts


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
@click.option("--shadow", "shadows", multiple=True, metavar="URL",
              help="Also send each recorded request to this backend and record its answer as a pair "
                   "(repeatable); the client is answered by the upstream alone.")
@click.option("--shadow-header", multiple=True, metavar="B:NAME=VALUE",
              help="Set a header on requests to shadow B (empty VALUE removes it); never written to the cassette.")
@click.option("--shadow-model", multiple=True, metavar="B=MODEL", help="Replace the JSON body's model for shadow B.")
@click.option("--shadow-path", multiple=True, metavar="B:/FROM=/TO",
              help="Send shadow B requests for /FROM to /TO; between /v1/chat/completions and /api/chat "
                   "the body is rewritten as the other API's.")
@click.option("--label-backend", multiple=True, metavar="B=NAME",
              help="The backend label of the upstream or a shadow (default: its host:port).")
@click.option("--shadow-max-in-flight", default=16, show_default=True, metavar="N",
              help="Shadow requests in flight per shadow; past that, requests are skipped and counted.")
@click.option("--shadow-timeout", default=300.0, show_default=True, metavar="SECONDS",
              help="How long a shadow may take to answer in full.")
@click.option("--shadow-loop", type=click.Choice(["thread", "proxy"]), default="thread", hidden=True,
              help="Where shadow requests run (proxy: on the proxy's own event loop; for bench/shadow_overhead.py).")
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
    shadows: tuple[str, ...],
    shadow_header: tuple[str, ...],
    shadow_model: tuple[str, ...],
    shadow_path: tuple[str, ...],
    label_backend: tuple[str, ...],
    shadow_max_in_flight: int,
    shadow_timeout: float,
    shadow_loop: str,
) -> None:
    """Record streaming responses through a proxy into a cassette.

    Reverse mode (default) fronts one backend: point the app at the listen
    address (OPENAI_BASE_URL=http://127.0.0.1:8080/v1). Regular mode is an
    HTTP(S) proxy: HTTPS_PROXY=http://127.0.0.1:8080 and trust
    ~/.mitmproxy/mitmproxy-ca-cert.pem. Ctrl-C stops; everything finished is saved.

    With --shadow B, each recorded request also goes to B at the same moment and
    B's answer is recorded beside the upstream's (labels backend, pair, role);
    `streamtape diff session.tape` compares the pairs. The client gets the
    upstream's answer exactly as without shadows.
    """
    # Late: mitmproxy takes most of a second to import, and only this command
    # (of the ones every `streamtape` run registers) needs it.
    from ..mitm.proxy import run_proxy
    from ..mitm.record import RecordAddon, credential_warning

    host, port = parse_listen(listen)
    fixed_labels = parse_labels(labels)  # fail before starting anything
    if mode == "reverse":
        if not upstream:
            raise OptionError("--upstream URL is required in reverse mode")
        spec = f"reverse:{check_upstream(upstream)}"
    else:
        if upstream:
            raise OptionError("--upstream is for reverse mode; regular mode proxies to any host")
        spec = "regular"
    plan = None
    if shadows or shadow_header or shadow_model or shadow_path or label_backend:
        plan = _shadow_plan(
            upstream if mode == "reverse" else None, shadows, shadow_header, shadow_model, shadow_path,
            label_backend, shadow_max_in_flight, shadow_timeout, insecure, fixed_labels,
        )

    failures: list[str] = []  # before the proxy ran: a bad option
    lost: list[str] = []  # while recording: the cassette stopped taking writes

    def finished(ix: Interaction) -> None:
        line = summary_line(ix)
        if ix.outcome is Outcome.UPSTREAM_ERROR and (ix.response is None or ix.response.status == 502):
            line += "  [upstream unreachable: the client got a 502]"
        click.echo(line)

    def failed(message: str) -> None:
        if addon.recorder is not None:
            # Already recording: say it now, and keep proxying for the app.
            click.echo(f"streamtape: error: {message}", err=True)
            lost.append(message)
        else:
            failures.append(message)

    sender = None
    if plan is not None:
        from ..shadow.sender import ShadowSender  # late: httpx, only for runs with shadows

        def shadow_finished(target: ShadowTarget, ix: Interaction) -> None:
            click.echo(f"  shadow {target.name}: {summary_line(ix)}")

        sender = ShadowSender(plan, on_finished=shadow_finished, own_thread=shadow_loop == "thread")

    def credential(c: Credential) -> None:
        click.echo(f"streamtape: warning: {credential_warning(c, '--redact-field ')}", err=True)

    def not_saved(ix: Interaction) -> None:
        # The client was served; the cassette could not take the recording (said once on stderr).
        click.echo(f"{summary_line(ix)}  [not saved]")

    addon = RecordAddon(on_saved=finished, on_error=failed, shadow=sender, on_credential=credential,
                        on_lost=not_saved)

    def running(addrs: list[tuple[str, int]]) -> None:
        if failures:
            return
        where = ", ".join(f"{h}:{p}" for h, p in addrs)
        target = f"-> {upstream}" if upstream else "(regular HTTP(S) proxy)"
        click.echo(f"streamtape: recording on {where} {target}, appending to {out}", err=True)
        if plan is not None:
            names = ", ".join(f"{t.name} ({t.url})" for t in plan.targets)
            click.echo(f"streamtape: shadows: {names}", err=True)
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
    if sender is not None:
        for c in sender.counts.values():
            click.echo(f"streamtape: shadow {c.name}: {shadow_counts(c)}", err=True)
    if lost:
        click.echo(
            f"streamtape: stopped; {n} interaction{'s' if n != 1 else ''} saved to {out}, "
            f"{addon.lost} could not be written",
            err=True,
        )
        sys.exit(1)
    click.echo(f"streamtape: stopped; {n} interaction{'s' if n != 1 else ''} saved to {out}", err=True)




def _shadow_plan(
    upstream: str | None,
    shadows: tuple[str, ...],
    headers: tuple[str, ...],
    models: tuple[str, ...],
    paths: tuple[str, ...],
    label_backend: tuple[str, ...],
    max_in_flight: int,
    timeout: float,
    insecure: bool,
    fixed_labels: dict[str, str],
) -> ShadowPlan:
    taken = next((k for k in SESSION_LABELS if k in fixed_labels), None)
    if taken is not None:
        raise OptionError(
            f"--label {taken}=...: a shadow recording sets the {taken!r} label itself"
            + (" (name backends with --label-backend B=NAME)" if taken == "backend" else "")
        )
    return build_plan(
        upstream=upstream,
        shadows=shadows,
        headers=headers,
        models=models,
        paths=paths,
        label_backends=label_backend,
        max_in_flight=max_in_flight,
        timeout_s=timeout,
        verify=not insecure,
    )


def shadow_counts(c: TargetCounts) -> str:
    """``12 recorded (1 failed), 3 skipped (in-flight bound), 1 not mappable``."""
    parts = [f"{c.recorded} recorded" + (f" ({c.failed} failed)" if c.failed else "")]
    if c.skipped:
        parts.append(f"{c.skipped} skipped (in-flight bound)")
    if c.unmappable:
        parts.append(f"{c.unmappable} not mappable")
    return ", ".join(parts)


commands = [record]
