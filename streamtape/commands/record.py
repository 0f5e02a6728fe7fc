"""``streamtape record``: run mitmproxy in-process with the recording addon.

The recording flags (``-o/--out``, ``--label``, ``--all``, ``--filter``,
``--no-redact``, ``--redact-*``) are not declared here: each is derived from
its option's one declaration in :mod:`streamtape.mitm.record_options`, and
what it says reaches the addon as that option. The flags declared here are
the command's own: what to front and where to listen, mitmproxy's folder and
TLS checks, and shadows.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..capture.credentials import Credential
from ..capture.recorder import parse_labels
from ..capture.upstream_error import tls_verification_failed
from ..cassette.model import Interaction, Outcome
from ..errors import OptionError
from ..fmt import summary_line
from ..mitm import record_options as option
from ..mitm.record_options import (
    RECORD_OPTIONS,
    BoolOption,
    ListOption,
    RecordOption,
    StrOption,
    naming_the_flag,
)
from ..shadow import ShadowPlan, ShadowTarget, build_plan
from ..shadow.labels import SESSION_LABELS
from ..shadow.targets import backend_url

if TYPE_CHECKING:
    from ..shadow.sender import ShadowSender, TargetCounts

_F = TypeVar("_F", bound=Callable[..., Any])


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


def proxy_spec(mode: str, upstream: str | None) -> str:
    """mitmproxy's mode for ``--mode`` and ``--upstream``: ``reverse:URL`` or ``regular``."""
    if mode == "reverse":
        if not upstream:
            raise OptionError("--upstream URL is required in reverse mode")
        return f"reverse:{backend_url('--upstream', upstream, path=False)}"
    if upstream:
        raise OptionError("--upstream is for reverse mode; regular mode proxies to any host")
    return "regular"


def _flag(o: RecordOption) -> Callable[[_F], _F]:
    """The click option of a recording option's flag; its parameter is named for the option."""
    decls = (*o.flags, o.name)
    if isinstance(o, BoolOption):  # True when given: the option turned from its default (from_flag)
        return click.option(*decls, is_flag=True, help=o.cli_help)
    if isinstance(o, ListOption):
        return click.option(*decls, multiple=True, metavar=o.metavar, help=o.cli_help)
    assert isinstance(o, StrOption), o
    return click.option(*decls, default=o.default, show_default=bool(o.default), metavar=o.metavar, help=o.cli_help)


def recording_flags(f: _F) -> _F:
    """Decorate a command with every recording option's flag, in declaration order."""
    for o in reversed(RECORD_OPTIONS):  # click lists the last decorator applied first
        f = _flag(o)(f)
    return f


def mitm_options(flags: Mapping[str, Any], confdir: str | None, insecure: bool) -> dict[str, object]:
    """mitmproxy's options for the flags: every recording option, and mitmproxy's own where a flag set one."""
    options: dict[str, object] = {o.name: o.from_flag(flags[o.name]) for o in RECORD_OPTIONS}
    if confdir:
        options["confdir"] = confdir
    if insecure:
        options["ssl_insecure"] = True
    return options


@click.command()
@click.option("--upstream", metavar="URL", help="Backend to front (reverse mode), e.g. http://127.0.0.1:8080.")
@click.option("--listen", "listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
              help="Address to listen on (port 0 picks a free one).")
@click.option("--mode", type=click.Choice(["reverse", "regular"]), default="reverse", show_default=True,
              help="reverse: front one backend. regular: an HTTP(S) proxy for any app.")
@recording_flags
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
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), metavar="N",
              help="Record with N proxy processes sharing the listening port (Linux), one core each; "
                   "their recordings are joined into the one cassette at the end.")
def record(
    upstream: str | None,
    listen: str,
    mode: str,
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
    workers: int,
    **flags: Any,
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

    With --workers N, N proxies share the port (the kernel spreads connections
    over them), each writing its finished recordings to OUT.workerK as it goes;
    at Ctrl-C they are joined into OUT in the order they started. A run that is
    killed leaves the OUT.workerK files, each a cassette, and the next run on
    OUT joins them in first.
    """
    # ``flags``: the recording flags (recording_flags), by option name.
    # Every check that needs no proxy comes first: fail before starting anything.
    host, port = parse_listen(listen)
    fixed_labels = parse_labels(flags[option.LABEL.name])
    spec = proxy_spec(mode, upstream)
    plan = None
    if shadows or shadow_header or shadow_model or shadow_path or label_backend:
        plan = _shadow_plan(
            upstream, shadows, shadow_header, shadow_model, shadow_path,
            label_backend, shadow_max_in_flight, shadow_timeout, insecure, fixed_labels,
        )
    # Late: mitmproxy takes most of a second to import, and only this command
    # (of the ones every `streamtape` run registers) needs it.
    from ..mitm.proxy import run_proxy

    options = mitm_options(flags, confdir, insecure)
    out = flags[option.OUT.name]
    if workers > 1:
        _record_with_workers(workers, out, upstream, plan, spec, host, port, options,
                             own_thread=shadow_loop == "thread")
        return
    run = _Run(out, upstream, plan, own_thread=shadow_loop == "thread")
    asyncio.run(run_proxy(spec, host, port, [run.addon], on_running=run.running, options=options))
    run.stopped()


def _record_with_workers(
    count: int, out: str, upstream: str | None, plan: ShadowPlan | None, spec: str,
    host: str, port: int, options: Mapping[str, object], *, own_thread: bool,
) -> None:
    """``record --workers N``: N recorders on one port (:func:`~streamtape.serve.workers.run_workers`),
    each into its part of the cassette, joined into ``out`` once they stop."""
    from ..cassette.lock import hold
    from ..mitm.proxy import run_proxy
    from ..serve.workers import Seat, run_workers
    from . import _parts

    def warn(line: str) -> None:
        click.echo(line, err=True)

    # The parent holds the cassette's lock for the whole run, so no other writer
    # appends to it between the start and the join (the workers inherit the hold
    # and never release it: it goes when the parent lets go).
    lock = hold(out, 0, shared=True)
    try:
        folded = _parts.join(out, warn)
        if folded:
            warn(f"streamtape: joined {_parts.said(folded)} left in worker files of an earlier run "
                 f"into {out}")

        def body(seat: Seat) -> dict[str, int]:
            part = _parts.path(out, seat.index)
            run = _Run(part, upstream, plan, own_thread=own_thread, echo=seat.log, warn=seat.warn,
                       on_ready=lambda addrs: seat.ready(f"{addrs[0][0]}:{addrs[0][1]}"))
            asyncio.run(run_proxy(spec, host, seat.port, [run.addon], on_running=run.running,
                                  options={**options, option.OUT.name: part},
                                  reuse_port=True, tcp_only=seat.index > 0,
                                  lifeline=seat.lifeline))
            return run.finish().counts()

        try:
            counts = run_workers(
                count, host, port, body, on_line=click.echo, on_warning=warn,
                on_ready=lambda addr: announce(warn, [_address(addr)], upstream, plan, out, count),
            )
        finally:
            # Whatever ended the run, every recording a worker finished ends up in ``out``.
            joined = _parts.join(out, warn)
    finally:
        lock.release()
    totals = Totals()
    for c in counts:
        totals.add(c, plan)
    per = " + ".join(str(c.get("saved", 0)) for c in counts)
    extra = "" if joined == totals.saved else f"; {_parts.said(joined)} joined from the worker files"
    say_totals(totals, out, warn, detail=f" (by {count} workers: {per}{extra})")


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)



INSECURE_HINT = "--insecure records from a backend with a self-signed certificate"
"""The way out of an upstream certificate that fails verification: in the record line, and in
the message of the 502 the client gets (the addon's ``insecure_hint``)."""


class _Run:
    """One ``streamtape record`` run: its addon (and shadow sender), and what it says.

    A line per recording on stdout; the rest on stderr. A failure before the
    proxy runs (a bad option) becomes the command's error once the proxy has
    stopped; one while recording (the cassette stopped taking writes) is said
    at once, the proxy goes on serving, and the exit status is 1.
    """

    def __init__(
        self, out: str, upstream: str | None, plan: ShadowPlan | None, *, own_thread: bool,
        echo: Callable[[str], None] = click.echo,
        warn: Callable[[str], None] = lambda line: click.echo(line, err=True),
        on_ready: Callable[[list[tuple[str, int]]], None] | None = None,
    ) -> None:
        from ..mitm.record import RecordAddon  # late: mitmproxy (see record)

        self.out = out
        self.echo = echo
        """Where a recording's line goes (stdout; a worker's pipe to the parent)."""
        self.warn = warn
        """Where the other lines go (stderr; a worker's pipe to the parent)."""
        self.on_ready = on_ready or self.announce
        """Called once the proxy listens (the address line, or a worker's ready message)."""
        self.upstream = upstream
        self.plan = plan
        self.failures: list[str] = []  # before the proxy ran: a bad option
        self.lost: list[str] = []  # while recording: the cassette stopped taking writes
        self.sender: ShadowSender | None = None
        if plan is not None:
            from ..shadow.sender import ShadowSender  # late: httpx, only for runs with shadows

            self.sender = ShadowSender(plan, on_finished=self.shadow_finished, own_thread=own_thread)
        self._lines_lock = threading.Lock()
        self._primaries: dict[str, str] = {}
        """Primary lines waiting for their pair's shadow lines."""
        self._groups: dict[str, list[str]] = {}
        """Shadow lines waiting for their pair's primary line or its other shadows."""
        self._timers: dict[str, threading.Timer] = {}
        """Pairs whose primary line is in, and how long they wait for their shadows."""
        self._printed: set[str] = set()
        """Pairs whose primary line is out: a shadow line of theirs goes out at once."""
        self.addon = RecordAddon(on_saved=self.saved, on_error=self.failed, shadow=self.sender,
                                 on_credential=self.credential, on_lost=self.not_saved,
                                 insecure_hint=INSECURE_HINT)
        from ..serve.collector import QuietCollector

        # mitmproxy keeps dozens of objects per flow: a full collection while a response
        # streams stops the loop that stamps its pieces (the replay server's reason too).
        self.collector = QuietCollector(self._recording)

    def _recording(self) -> bool:
        rec = self.addon.recorder
        return rec is not None and rec.in_flight > 0

    # -- the addon's callbacks -----------------------------------------------------

    def saved(self, ix: Interaction) -> None:
        line = summary_line(ix)
        if ix.outcome is Outcome.UPSTREAM_ERROR and (ix.response is None or ix.response.status == 502):
            if tls_verification_failed(ix.error):
                line += f"  [upstream TLS certificate not trusted: the client got a 502; {INSECURE_HINT}]"
            else:
                line += "  [upstream unreachable: the client got a 502]"
        self._primary_line(ix, line)

    def not_saved(self, ix: Interaction) -> None:
        # The client was served; the cassette could not take the recording (said once on stderr).
        self._primary_line(ix, f"{summary_line(ix)}  [not saved]")

    def shadow_finished(self, target: ShadowTarget, ix: Interaction) -> None:
        self._shadow_line(ix, f"  shadow {target.name}: {summary_line(ix)}")

    # A pair's lines go out together, primary first, its shadows' after it. The
    # primary's line comes from the writer thread once it is on disk, the shadows'
    # from the sender's thread, in any order and at any time (a shadow may end
    # before its primary, or after another pair has ended). So a pair's lines wait
    # until all are in (one per shadow) and go out as one group, which another pair's
    # lines never split. A shadow that hangs must hold nothing up for long: once its
    # primary is in, a pair waits at most PAIR_WAIT_S, then goes out with the shadow
    # lines it has, and a shadow line after that goes out when it comes.

    PAIR_WAIT_S = 1.0

    def _pair_of(self, ix: Interaction) -> str | None:
        from ..shadow.labels import LABEL_PAIR  # late: shadows only

        return ix.labels.get(LABEL_PAIR) if self.plan is not None else None

    def _primary_line(self, ix: Interaction, line: str) -> None:
        pair = self._pair_of(ix)
        with self._lines_lock:
            if pair is None:
                self.echo(line)
                return
            self._primaries[pair] = line
            if not self._print_if_whole(pair):
                timer = threading.Timer(self.PAIR_WAIT_S, self._release, (pair,))
                timer.daemon = True
                self._timers[pair] = timer
                timer.start()

    def _shadow_line(self, ix: Interaction, line: str) -> None:
        pair = self._pair_of(ix)
        with self._lines_lock:
            if pair is None or pair in self._printed:
                self.echo(line)  # its pair went out without it (it came late)
                return
            self._groups.setdefault(pair, []).append(line)
            self._print_if_whole(pair)

    def _print_if_whole(self, pair: str) -> bool:
        """Under the lock: print ``pair``'s lines if its primary and every shadow are in."""
        assert self.plan is not None
        if pair not in self._primaries or len(self._groups.get(pair, [])) < len(self.plan.targets):
            return False
        self._print_pair(pair)
        return True

    def _print_pair(self, pair: str) -> None:
        """Under the lock: print what ``pair`` has, its primary first."""
        timer = self._timers.pop(pair, None)
        if timer is not None:
            timer.cancel()
        primary = self._primaries.pop(pair, None)
        for line in ([primary] if primary is not None else []) + self._groups.pop(pair, []):
            self.echo(line)
        if primary is not None:
            self._printed.add(pair)

    def _release(self, pair: str) -> None:
        """The wait is over (a timer thread): the pair goes out with what it has."""
        with self._lines_lock:
            if pair in self._primaries:
                self._print_pair(pair)

    def flush_pairs(self) -> None:
        """At the end: the pairs still waiting, each pair's lines together (shadow lines
        whose primary was not printed, as it was not saved, go out on their own)."""
        with self._lines_lock:
            for pair in list(dict.fromkeys([*self._primaries, *self._groups])):
                self._print_pair(pair)

    def failed(self, message: str) -> None:
        message = naming_the_flag(message)  # the addon names the option; the user typed the flag
        if self.addon.recorder is not None:
            # Already recording: say it now, and keep proxying for the app.
            self.warn(f"streamtape: error: {message}")
            self.lost.append(message)
        else:
            self.failures.append(message)

    def credential(self, c: Credential) -> None:
        from ..mitm.record import credential_warning  # late: mitmproxy (see record)

        self.warn(f"streamtape: warning: {credential_warning(c, f'{option.REDACT_FIELDS.flag} ')}")

    # -- start and end ---------------------------------------------------------------

    def running(self, addrs: list[tuple[str, int]]) -> None:
        if self.failures:
            return
        self.collector.start()
        self.on_ready(addrs)

    def announce(self, addrs: list[tuple[str, int]]) -> None:
        announce(self.warn, addrs, self.upstream, self.plan, self.out)

    def finish(self) -> Totals:
        """After the proxy: the option error (raised), or what was saved and lost."""
        self.collector.stop()
        if self.failures:
            raise OptionError(self.failures[0])
        self.flush_pairs()
        shadows = list(self.sender.counts.values()) if self.sender is not None else []
        lost = (self.addon.lost or len(self.lost)) if self.lost else 0
        return Totals(self.addon.saved, lost, shadows)

    def stopped(self) -> None:
        """After the proxy: the option error, or the totals (exit status 1 if recordings were lost)."""
        say_totals(self.finish(), self.out, self.warn)


@dataclass
class Totals:
    """What a run (or a worker of one) recorded."""

    saved: int = 0
    lost: int = 0
    """Finished recordings the cassette could not take."""
    shadows: list[TargetCounts] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """As a worker sends them to the parent (flat counts)."""
        out = {"saved": self.saved, "lost": self.lost}
        for n, c in enumerate(self.shadows):
            for key, value in asdict(c).items():
                if isinstance(value, int):
                    out[f"shadow.{n}.{key}"] = value
        return out

    def add(self, counts: Mapping[str, int], plan: ShadowPlan | None) -> None:
        """Add a worker's :meth:`counts`."""
        from ..shadow.sender import TargetCounts  # late: shadows only

        self.saved += counts.get("saved", 0)
        self.lost += counts.get("lost", 0)
        if plan is None:
            return
        if not self.shadows:
            self.shadows = [TargetCounts(t.name) for t in plan.targets]
        for n, c in enumerate(self.shadows):
            for key in asdict(c):
                if (value := counts.get(f"shadow.{n}.{key}")) is not None:
                    setattr(c, key, getattr(c, key) + value)


def announce(warn: Callable[[str], None], addrs: list[tuple[str, int]], upstream: str | None,
             plan: ShadowPlan | None, out: str, workers: int = 1) -> None:
    """The lines that say the recorder listens."""
    where = ", ".join(f"{h}:{p}" for h, p in addrs)
    target = f"-> {upstream}" if upstream else "(regular HTTP(S) proxy)"
    many = f" with {workers} workers" if workers > 1 else ""
    warn(f"streamtape: recording on {where} {target}{many}, appending to {out}")
    if plan is not None:
        names = ", ".join(f"{t.name} ({t.url})" for t in plan.targets)
        warn(f"streamtape: shadows: {names}")
    warn("streamtape: Ctrl-C to stop")


def say_totals(totals: Totals, out: str, warn: Callable[[str], None], detail: str = "") -> None:
    """The closing lines (exit status 1 if recordings were lost)."""
    sys.stdout.flush()
    for c in totals.shadows:
        warn(f"streamtape: shadow {c.name}: {shadow_counts(c)}")
    n = totals.saved
    saved = f"{n} interaction{'s' if n != 1 else ''} saved to {out}{detail}"
    if totals.lost:
        warn(f"streamtape: stopped; {saved}, {totals.lost} could not be written")
        sys.exit(1)
    warn(f"streamtape: stopped; {saved}")


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
            f"{option.LABEL.flag} {taken}=...: a shadow recording sets the {taken!r} label itself"
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
