"""``streamtape play``: play one recorded response to the terminal, in real time.

The pure half, :func:`plan`, turns a schedule into what to write after each
step (the assembled answer text for LLM formats, or the raw bytes); the
command only waits for each step's deadline and writes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import BinaryIO, Literal

import click

from ..cassette.model import Interaction
from ..cassette.pieces import Piece
from ..cassette.reader import load
from ..clock import now_ns, sleep_until_sync
from ..errors import OptionError
from ..fmt import human_bytes, ms, path_of
from ..interop import timing_note
from ..profiles import Schedule, StepKind, parse_profile
from ..shapes import analyze, check_shape
from ..wire import Framing
from ._common import warn

# Shapes whose answer text `play` shows; anything else is written as bytes.
_GENERIC = ("raw", "sse", "ndjson")


@dataclass(frozen=True)
class Plan:
    """What ``play`` writes: ``outputs[i]`` right after ``schedule.steps[i]``."""

    schedule: Schedule
    outputs: tuple[bytes, ...]
    mode: Literal["text", "raw"]
    """``text``: the assembled answer of format ``shape``; ``raw``: the body bytes."""
    shape: str


def _text_outputs(ix: Interaction, sched: Schedule, shape: str | None) -> tuple[list[bytes], str] | None:
    """The answer text that becomes complete at each step, or None when there is none to show."""
    resp = ix.response
    if resp is None or not 200 <= sched.status < 300:
        return None
    # Replay the schedule's pieces as a recording whose piece i arrives "at" i:
    # every normalized event then says which step completed it.
    pieces = tuple(Piece(i, s.data) for i, s in enumerate(sched.steps) if s.kind == StepKind.SEND)
    synthetic = replace(ix, response=replace(resp, pieces=pieces))
    a = analyze(synthetic, shape)
    if a.shape in _GENERIC and shape is None:
        return None
    outs = [bytearray() for _ in sched.steps]
    named: set[int] = set()
    for e in a.events:
        if e.choice not in (None, 0) or not 0 <= e.at_ns < len(outs):
            continue
        out = outs[e.at_ns]
        if e.kind == "text" and e.text and not e.special and e.channel is None:
            out += e.text.encode()
        elif e.kind == "tool_call":
            idx = e.index if e.index is not None else 0
            if idx not in named and (e.name or e.arguments):
                named.add(idx)
                out += f"\n[tool call {e.name or '?'}] ".encode()
            out += (e.arguments or "").encode()
        elif e.kind == "error":
            err = e.error
            msg = err.get("message", err) if isinstance(err, dict) else err
            out += f"\n[error: {msg}]\n".encode()
    return [bytes(o) for o in outs], a.shape


def plan(ix: Interaction, sched: Schedule, *, raw: bool = False, shape: str | None = None) -> Plan:
    """What to write after each step: answer text for LLM formats, else (or ``raw``) the bytes."""
    if not raw:
        got = _text_outputs(ix, sched, shape)
        if got is not None:
            texts, detected = got
            return Plan(sched, tuple(texts), "text", detected)
    outs = tuple(s.data if s.kind == StepKind.SEND else b"" for s in sched.steps)
    return Plan(sched, outs, "raw", shape or "raw")


def marker(gap_ns: int, size: int) -> str:
    """The ``--boundaries`` mark before a piece: the silence before it and its size."""
    return f"[+{gap_ns / 1e6:.1f}ms {size}B]"


def run(
    p: Plan,
    out: BinaryIO,
    *,
    boundaries: bool = False,
    color: bool = False,
    sleep: bool = True,
) -> tuple[int, int]:
    """Play the plan against absolute deadlines; returns (first byte offset, elapsed) in ns."""

    def mark(text: str) -> bytes:
        return (click.style(text, dim=True) if color else text).encode()

    sched = p.schedule
    t0 = now_ns()
    first_ns = -1
    if sleep:
        sleep_until_sync(t0 + sched.head_at_ns)
    if boundaries and sched.framing != Framing.NONE:
        out.write(mark(f"[head {sched.status} at {sched.head_at_ns / 1e6:.1f}ms]"))
        out.flush()
    prev = sched.head_at_ns
    for step, data in zip(sched.steps, p.outputs, strict=True):
        if sleep:
            sleep_until_sync(t0 + step.at_ns)
        chunk = b""
        if step.kind == StepKind.SEND:
            if first_ns < 0:
                first_ns = now_ns() - t0
            if boundaries:
                chunk += mark(marker(step.at_ns - prev, len(step.data)))
            prev = step.at_ns
        elif boundaries:
            chunk += mark(f"[{step.kind} +{(step.at_ns - prev) / 1e6:.1f}ms]")
        chunk += data
        if chunk:
            out.write(chunk)
            out.flush()
    return first_ns, now_ns() - t0


def playback_line(index: int, ix: Interaction, p: Plan, first_ns: int, elapsed_ns: int) -> str:
    """The line ``play`` ends with: what was played, under which profile, and how it went."""
    sched = p.schedule
    status = sched.status if sched.framing != Framing.NONE else "no response head"
    n = len(sched.sends)
    what = p.shape if p.mode == "text" else "raw bytes"
    ending = {"end": "ended cleanly", "cut": "cut (no clean end)", "reset": "reset (TCP RST)"}
    return (
        f"#{index} {ix.request.method} {path_of(ix.request.url)} {status} ({what}) "
        f"profile {sched.text}: {n} piece{'s' if n != 1 else ''}, {human_bytes(len(sched.body))}, "
        f"first byte {ms(first_ns) if first_ns >= 0 else '-'} ms, took {ms(elapsed_ns)} ms "
        f"(scheduled {ms(sched.duration_ns)} ms), {ending[sched.ending]}"
    )


@click.command("play")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-i", "--index", "index", type=int, default=0, show_default=True,
              help="Which interaction of the cassette (0 is the first).")
@click.option("--profile", "profile_text", default="faithful", show_default=True,
              help="Replay profile: a preset or key=value items (see 'streamtape profiles').")
@click.option("--boundaries", is_flag=True,
              help="Mark every piece with the silence before it and its size, and the end.")
@click.option("--raw", is_flag=True, help="Write the body bytes instead of the assembled answer text.")
@click.option("--shape", default=None, help="Decode as this format instead of detecting it.")
def play(file: str, index: int, profile_text: str, boundaries: bool, raw: bool, shape: str | None) -> None:
    """Play one recorded response to stdout as it streams, in real time.

    LLM formats show the assembled answer text (tool calls and errors marked);
    other bodies, and --raw, write the bytes. One summary line ends on stderr.
    """
    profile = parse_profile(profile_text)
    cas = load(file)
    warn(cas)
    if not 0 <= index < len(cas):
        have = f"it has {len(cas)}: 0..{len(cas) - 1}" if len(cas) else "it is empty"
        raise OptionError(f"{file}: no interaction {index} (-i); {have}")
    ix = cas[index]
    if shape is not None:
        check_shape(shape)
    sched = profile.schedule(ix)
    p = plan(ix, sched, raw=raw, shape=shape)
    out = sys.stdout.buffer
    color = boundaries and sys.stdout.isatty()
    first_ns, elapsed = run(p, out, boundaries=boundaries, color=color)
    written_nl = True
    tail = b"".join(p.outputs)[-1:]
    if tail and tail != b"\n":
        written_nl = False
    if not written_nl and (p.mode == "text" or sys.stdout.isatty()):
        out.write(b"\n")
        out.flush()
    note = timing_note(ix, profile)  # an imported recording's timing is made up
    click.echo(playback_line(index, ix, p, first_ns, elapsed) + (f"; {note}" if note else ""), err=True)


commands = [play]
