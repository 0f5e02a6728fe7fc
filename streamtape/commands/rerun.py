"""``streamtape rerun SESSION.tape --upstream URL -o OUT.tape``: the recorded requests, sent again."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import click

from ..cassette.model import Interaction
from ..cassette.reader import load
from ..errors import OptionError
from ..fmt import ms
from ..rerun.mapping import build_target, check_sendable, parse_map
from ..rerun.schedule import Arrivals, SchedulePlan, parse_rate
from ._common import warn

if TYPE_CHECKING:
    from ..rerun.run import Counts

PROGRESS_EVERY_S = 0.25


def locustfile_path() -> Path:
    """The locustfile shipped in the package."""
    return Path(__file__).resolve().parent.parent / "rerun" / "locustfile.py"


def interaction_filter(expression: str) -> Callable[[Interaction], bool]:
    """A mitmproxy filter expression (``record --filter``'s language) over recordings."""
    from mitmproxy import flowfilter, http
    from mitmproxy.test import tflow

    try:
        flt = flowfilter.parse(expression)
    except ValueError as e:
        raise OptionError(f"--filter {expression!r}: {e}") from None

    def keep(ix: Interaction) -> bool:
        r = ix.request
        flow = tflow.tflow(resp=False)
        flow.request = http.Request.make(r.method, r.url, r.body, [(k.encode(), v.encode()) for k, v in r.headers])
        if ix.response is not None:
            flow.response = http.Response.make(
                ix.response.status, ix.response.body,
                [(k.encode(), v.encode()) for k, v in ix.response.headers],
            )
        return bool(flt(flow))

    return keep


def _schedule(arrivals: str | None, speed: float | None, rate: str | None, concurrency: int | None,
              repeat: int | None, duration: float | None, seed: int) -> SchedulePlan:
    kind = Arrivals(arrivals) if arrivals else (Arrivals.FIXED if rate else Arrivals.RECORDED)
    if rate is not None and kind not in (Arrivals.FIXED, Arrivals.POISSON):
        raise OptionError(f"--rate goes with --arrivals fixed or poisson, not {kind}")
    if kind in (Arrivals.FIXED, Arrivals.POISSON) and rate is None:
        raise OptionError(f"--arrivals {kind} needs --rate N/s")
    if speed is not None and kind is not Arrivals.RECORDED:
        raise OptionError("--speed scales the recorded arrival times; it does not go with --rate or a closed loop")
    return SchedulePlan(
        arrivals=kind,
        speed=speed if speed is not None else 1.0,
        rate=parse_rate(rate) if rate is not None else None,
        repeat=repeat,
        duration_s=duration,
        concurrency=concurrency,
        seed=seed,
    )


def _progress_line(c: Counts, total: str) -> str:
    p50 = c.ttft_p(50)
    return (f"sent {c.sent}{total}  done {c.done}  failed {c.failed}  in flight {c.in_flight}"
            + (f"  missed {c.missed}" if c.missed else "")
            + (f"  not sent {c.not_sent}" if c.not_sent else "")
            + f"  TTFT p50 {ms(p50) + ' ms' if p50 is not None else '-'}")


@click.command("rerun")
@click.argument("session", required=False, type=click.Path(dir_okay=False))
@click.option("--upstream", metavar="URL", help="The backend to send the recorded requests to.")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), metavar="OUT.tape",
              help="The session cassette to write (a new file, unless --append).")
@click.option("--append", is_flag=True, help="Add this run to an existing OUT.tape (diff then reads all its runs).")
@click.option("-i", "--index", "indices", type=int, multiple=True, metavar="N",
              help="Re-run recording N only (repeatable; default: every recorded request).")
@click.option("--filter", "filter_expr", metavar="EXPR",
              help="Re-run the recordings a mitmproxy filter expression matches (as record --filter).")
@click.option("--arrivals", type=click.Choice([a.value for a in Arrivals]),
              help="recorded (default): the recorded start times; fixed or poisson: at --rate; "
              "closed: --concurrency requests back to back.")
@click.option("--speed", type=float, metavar="F", help="Compress the recorded intervals (2: twice as fast).")
@click.option("--rate", metavar="N/s", help="Send N requests per second (evenly; --arrivals poisson: Poisson).")
@click.option("--seed", type=int, default=0, show_default=True, help="The Poisson arrivals' seed.")
@click.option("--concurrency", type=int, metavar="N",
              help="At most N requests in flight; a send that finds N is counted as missed and goes out late.")
@click.option("--repeat", type=int, metavar="K", help="Send the set K times.")
@click.option("--duration", type=float, metavar="S", help="Keep looping over the set for S seconds.")
@click.option("--header", "headers", multiple=True, metavar="NAME=VALUE",
              help="Set a header on every request (credentials for the new backend: never written "
              "to the cassette); NAME= sends none.")
@click.option("--model", metavar="NAME", help="Replace the JSON body's top-level model.")
@click.option("--path", "paths", multiple=True, metavar="/FROM=/TO",
              help="Send requests for /FROM to /TO (OpenAI chat <-> Ollama chat bodies are mapped).")
@click.option("--name", "backend_name", metavar="NAME",
              help="The new backend's name in the cassette (default: its host:port).")
@click.option("--slo", metavar="TERMS", help="Goodput SLO, e.g. 'ttft<500ms,itl<50ms' (kept for diff).")
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True, metavar="S",
              help="How long one request may take, connect to the end of its body.")
@click.option("--drain-timeout", "drain_s", type=float, default=10.0, show_default=True, metavar="S",
              help="After Ctrl-C, how long the streams in flight get to end.")
@click.option("--insecure", is_flag=True, help="Do not verify the backend's TLS certificate.")
@click.option("--locustfile", is_flag=True,
              help="Print the path of the locustfile shipped with streamtape and exit.")
def rerun(session: str | None, upstream: str | None, output: str | None, indices: tuple[int, ...],
          filter_expr: str | None, arrivals: str | None, speed: float | None, rate: str | None, seed: int,
          concurrency: int | None, repeat: int | None, duration: float | None, headers: tuple[str, ...],
          model: str | None, paths: tuple[str, ...], backend_name: str | None, slo: str | None,
          timeout_s: float, drain_s: float, insecure: bool, locustfile: bool, append: bool) -> None:
    """Send the requests recorded in SESSION to another backend and record the answers.

    By default each request goes out at its recorded start time (the recorded
    concurrency comes back); --speed, --rate, --arrivals, --concurrency,
    --repeat and --duration change the schedule. Bodies and headers are sent
    as recorded, less the recorded credentials, with --header, --model and
    --path applied; a value recorded as REDACTED needs --header.

    OUT.tape is a session cassette: each recording it re-ran (the primary) and
    the new answer (the shadow), paired, so `streamtape diff OUT.tape` compares
    them and adds the load figures.

    Exit status: 0 when every request got an answer, 1 when some did not (each
    recorded with its outcome), 2 on bad input.
    """
    if locustfile:
        click.echo(str(locustfile_path()))
        return
    if session is None or upstream is None or output is None:
        missing = [n for n, v in (("SESSION", session), ("--upstream", upstream), ("-o", output)) if v is None]
        raise OptionError(f"rerun needs {', '.join(missing)} (streamtape rerun SESSION.tape --upstream URL -o OUT.tape)")
    if Path(output).resolve() == Path(session).resolve():
        raise OptionError(f"-o {output}: the output must not be the session it re-runs")
    if Path(output).exists() and not append:
        raise OptionError(f"-o {output}: exists already; give a new file, or --append to add this run to it")
    if timeout_s <= 0 or drain_s < 0:
        raise OptionError("--timeout must be more than 0 seconds and --drain-timeout at least 0")
    if slo is not None:
        from ..diff.load import parse_slo

        parse_slo(slo)
    plan = _schedule(arrivals, speed, rate, concurrency, repeat, duration, seed)
    request_map = parse_map(headers, model, paths)
    name = backend_name or urlsplit(upstream if "://" in upstream else f"http://{upstream}").netloc
    target = build_target(upstream, name, request_map)
    cas = load(session)
    warn(cas)
    for n in indices:
        if not 0 <= n < len(cas):
            raise OptionError(f"-i {n}: {session} holds {len(cas)} recording(s), #0 to #{len(cas) - 1}")

    from ..cassette.writer import BackgroundWriter
    from ..rerun.run import Rerun, pick

    keep = interaction_filter(filter_expr) if filter_expr else None
    items = pick(((f"{session}#{i}", ix) for i, ix in enumerate(cas)), indices=indices, keep=keep)
    if not items:
        raise OptionError(f"{session}: no recorded HTTP request to re-run" + (" matches" if keep or indices else ""))
    for it in items:
        check_sendable(target, it.recording.request, it.label)
    context = None
    if insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    writer = BackgroundWriter(output)
    runner = Rerun(items, target, plan, submit=writer.submit, new_id=writer.new_id, timeout_s=timeout_s,
                   drain_s=drain_s, ssl_context=context, slo=slo)
    rounds = plan.rounds
    total = f"/{len(items) * rounds}" if rounds is not None and plan.duration_s is None else ""
    live = sys.stderr.isatty()
    click.echo(f"streamtape: re-running {len(items)} request(s) of {session} against {target.url} "
               f"({plan.arrivals}{f' x{plan.speed:g}' if plan.arrivals is Arrivals.RECORDED else ''}), "
               f"writing {output}; Ctrl-C to stop", err=True)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, runner.stop)

        async def progress() -> None:
            while True:
                await asyncio.sleep(PROGRESS_EVERY_S)
                runner.analyze(1)
                click.echo("\r\033[K" + _progress_line(runner.counts, total), err=True, nl=False)

        shown = loop.create_task(progress()) if live else None
        try:
            await runner.run()
        finally:
            if shown is not None:
                shown.cancel()
                click.echo("\r\033[K", err=True, nl=False)

    started = time.monotonic()
    try:
        asyncio.run(main())
    finally:
        writer.close()
    runner.analyze()
    c = runner.counts
    wall = time.monotonic() - started
    errors = ", ".join(f"{k} {n}" for k, n in sorted(c.by_outcome.items()) if k != "complete")
    p50, p95 = c.ttft_p(50), c.ttft_p(95)
    cost = c.cost_per_piece_ns
    lines = [
        ("stopped: " if c.stopped else "") + _progress_line(c, total).replace("  in flight 0", ""),
        f"  {c.rps:.1f} req/s over {c.elapsed_s:.1f} s" if c.rps and c.elapsed_s else f"  took {wall:.1f} s",
        f"  TTFT p50 {ms(p50)} ms, p95 {ms(p95)} ms" if p50 is not None and p95 is not None else "  no first token",
        f"  failed: {errors}" if errors else "",
        f"  missed {c.missed} send(s): {c.missed} found {plan.concurrency} in flight and went out up to "
        f"{ms(c.late_max_ns)} ms late" if c.missed else "",
        f"  client cost {cost / 1000:.1f} µs per piece ({c.pieces} pieces)" if cost is not None else "",
        f"  wrote {output}; compare: streamtape diff {output}",
    ]
    click.echo("\n".join(line for line in lines if line))
    sys.stdout.flush()
    click.get_current_context().exit(1 if c.failed or c.not_sent else 0)


commands = [rerun]
