"""Text for ``show``: the normalized timeline, the assembled answer, the stats (no I/O)."""

from __future__ import annotations

import json
from typing import Any

from ..shapes.model import Analysis, Choice, Event, ToolCall
from ..stats import Stats


def _q(s: str | None, limit: int = 120) -> str:
    """A string as one JSON-quoted line (control characters escaped, non-ASCII kept)."""
    t = json.dumps(s or "", ensure_ascii=False)
    return t if len(t) <= limit else t[: limit - 2] + '…"'


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.1f}"


def event_detail(e: Event) -> str:
    k = e.kind
    if k == "start":
        return f"role={e.role}"
    if k == "text":
        tags = []
        if e.special:
            tags.append("special")
        if e.channel:
            tags.append(e.channel)
        return _q(e.text) + (f"  ({', '.join(tags)})" if tags else "")
    if k == "reasoning":
        block = f"#{e.index} " if e.index is not None else ""
        if e.signature is not None:
            return f"{block}signature ({len(e.signature)} characters)"
        if e.redacted is not None:
            return f"{block}redacted ({len(e.redacted)} characters of opaque data)"
        return block + _q(e.text)
    if k == "refusal":
        return _q(e.text)
    if k == "tool_call":
        parts = [f"#{e.index}"]
        if e.id:
            parts.append(f"id={e.id}")
        if e.name:
            parts.append(f"name={e.name}")
        parts.append(f"args={_q(e.arguments)}")
        return " ".join(parts)
    if k == "finish":
        return f"{e.reason} ({e.raw_reason})" if e.raw_reason not in (None, e.reason) else str(e.reason)
    if k == "usage":
        parts = [f"prompt={e.prompt_tokens}", f"completion={e.completion_tokens}"]
        if e.reasoning_tokens is not None:
            parts.append(f"reasoning={e.reasoning_tokens}")
        parts += [f"{name}={_ms(ns)}ms" for name, ns in (e.durations or {}).items()]
        return " ".join(parts)
    if k == "error":
        return e.error if isinstance(e.error, str) else json.dumps(e.error, ensure_ascii=False)
    if k == "state":
        t = json.dumps(e.state, ensure_ascii=False)
        return t if len(t) <= 120 else t[:119] + "…"
    return ""


def events_lines(analysis: Analysis) -> list[str]:
    """The normalized timeline: one line per common event (offset ms, wire event, kind, detail)."""
    lines = [f"{'offset ms':>10}  {'event':>5}  {'kind':<9}  detail"]
    for e in analysis.events:
        src = "-" if e.source is None else str(e.source)
        choice = f"[choice {e.choice}] " if e.choice not in (None, 0) else ""
        lines.append(f"{e.at_ns / 1e6:>10.3f}  {src:>5}  {e.kind:<9}  {choice}{event_detail(e)}".rstrip())
    if analysis.partial_tail:
        lines.append(f"{'':>10}  {'':>5}  {'(cut)':<9}  {len(analysis.partial_tail)} bytes of an "
                     "unfinished event")
    return lines


def _per_choice(analysis: Analysis, read: str) -> list[str]:
    """One assembled field of every choice as lines: alone for a single choice, under a
    ``[choice N]`` line each when there are several."""
    choices = analysis.choices or [Choice(0, text=analysis.text, reasoning=analysis.reasoning)]
    if len(choices) == 1:
        value: str = getattr(choices[0], read)
        return value.split("\n") if value else []
    out: list[str] = []
    for c in choices:
        value = getattr(c, read)
        out.append(f"[choice {c.index}]")
        out.extend(value.split("\n") if value else [])
    return out


def text_lines(analysis: Analysis) -> list[str]:
    """The assembled answer text alone, what a script pipes on. Tool calls, reasoning
    and a refusal are not answer text: they are in ``--events`` and ``--json``."""
    return _per_choice(analysis, "text")


def reasoning_lines(analysis: Analysis) -> list[str]:
    """The assembled reasoning alone (blocks and summary parts a blank line apart)."""
    return _per_choice(analysis, "reasoning")


def tool_call_json(c: ToolCall) -> dict[str, Any]:
    return {"index": c.index, "id": c.id, "name": c.name, "arguments": c.arguments,
            "parsed": c.parsed, "valid_json": c.valid_json}


def choice_json(c: Choice) -> dict[str, Any]:
    """One assembled choice: answer, reasoning, refusal, tool calls with parsed arguments,
    finish."""
    return {
        "index": c.index,
        "role": c.role,
        "text": c.text,
        "reasoning": c.reasoning,
        "refusal": c.refusal or None,
        "tool_calls": [tool_call_json(t) for t in c.tool_calls],
        "finish": None if c.finish is None else {"reason": c.finish.reason, "raw": c.finish.raw},
        "reasoning_signatures": c.reasoning_signatures,
        "redacted_reasoning": c.redacted_reasoning,
    }


def usage_json(analysis: Analysis) -> dict[str, Any] | None:
    u = analysis.usage
    if u is None:
        return None
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "reasoning_tokens": u.reasoning_tokens,
        "durations_ns": u.durations,
    }


def result_json(analysis: Analysis) -> dict[str, Any]:
    """The assembled result for scripts: every choice, and the usage of the whole
    response (servers count tokens per response, not per choice)."""
    return {
        "choices": [choice_json(c) for c in analysis.choices],
        "usage": usage_json(analysis),
        "errors": [e.error for e in analysis.errors],
        "states": analysis.states,
        "done": analysis.done,
    }


def analysis_fields(analysis: Analysis) -> dict[str, Any]:
    """The summary of an analysis as JSON-ready values."""
    a = analysis
    return {
        "shape": a.shape,
        "wire": a.wire,
        "finish": None if a.finish is None else {"reason": a.finish.reason, "raw": a.finish.raw},
        "usage": usage_json(a),
        "done": a.done,
        "role": a.role,
        "errors": [e.error for e in a.errors],
        "keepalives": a.keepalives,
        "line_endings": sorted(repr(x)[1:-1] for x in a.line_endings),
        "cut_chars": a.cut_chars,
        "invalid_json": a.invalid_json,
        "events": a.events_count,
        "pieces": a.pieces,
        "choices": len(a.choices),
    }


def event_json(e: Event) -> dict[str, Any]:
    d: dict[str, Any] = {"offset_ms": e.at_ns / 1e6, "kind": e.kind}
    for name in ("role", "text", "index", "id", "name", "arguments", "reason", "raw_reason",
                 "prompt_tokens", "completion_tokens", "durations", "error", "source",
                 "special", "channel", "choice", "signature", "redacted", "reasoning_tokens", "state"):
        v = getattr(e, name)
        if v is not None:
            d[name] = v
    return d


def stats_fields(stats: Stats) -> dict[str, Any]:
    """:class:`streamtape.stats.Stats` as JSON-ready values (times in ms)."""
    def m(ns: int | None) -> float | None:
        return None if ns is None else round(ns / 1e6, 3)

    return {
        "ttfb_ms": m(stats.ttfb_ns),
        "first_reasoning_ms": m(stats.first_reasoning_ns),
        "ttft_ms": m(stats.ttft_ns),
        "gap_p50_ms": m(stats.gap_p50_ns),
        "gap_p95_ms": m(stats.gap_p95_ns),
        "gap_max_ms": m(stats.gap_max_ns),
        "duration_ms": m(stats.duration_ns),
        "pieces": stats.pieces,
        "events": stats.events,
        "events_per_piece": None if stats.events_per_piece is None
        else round(stats.events_per_piece, 3),
        "tokens": stats.tokens,
        "reasoning_tokens": stats.reasoning_tokens,
        "tokens_per_s": None if stats.tokens_per_s is None else round(stats.tokens_per_s, 2),
        "stall_ms": stats.stall_ms,
        "stalls": [{"after_ms": m(s.after_ns), "gap_ms": m(s.gap_ns)} for s in stats.stalls],
    }


def stats_lines(stats: Stats, analysis: Analysis | None = None) -> list[str]:
    """A few lines of figures for ``show -i N``."""
    s = stats
    lines = []
    if analysis is not None:
        a = analysis
        fin = "-" if a.finish is None else (
            a.finish.reason + (f" ({a.finish.raw})" if a.finish.raw not in (None, a.finish.reason)
                               else ""))
        lines.append(f"shape: {a.shape} ({a.wire or 'raw'})  finish: {fin}  "
                     f"done: {'yes' if a.done else 'no'}"
                     + (f"  errors: {len(a.errors)}" if a.errors else "")
                     + (f"  keep-alives: {a.keepalives}" if a.keepalives else "")
                     + (f"  cut chars: {a.cut_chars}" if a.cut_chars else ""))
    if analysis is not None and len(analysis.choices) > 1:
        lines.append("choices: " + "  ".join(
            f"#{c.index} {c.finish.reason if c.finish else 'no finish'}"
            + (f" ({len(c.text)} chars)" if c.text else "")
            + (f" {len(c.tool_calls)} tool call(s)" if c.tool_calls else "")
            for c in analysis.choices))
    if analysis is not None and (analysis.reasoning or analysis.refusal):
        parts = []
        if analysis.reasoning:
            parts.append(f"reasoning: {len(analysis.reasoning)} characters")
        if analysis.refusal:
            parts.append(f"refusal: {_q(analysis.refusal, 80)}")
        lines.append("  ".join(parts))
    ttft = f"ttft {_ms(s.ttft_ns)} ms"
    if s.first_reasoning_ns is not None:
        ttft = (f"first reasoning token {_ms(s.first_reasoning_ns)} ms  "
                f"first answer token (ttft) {_ms(s.ttft_ns)} ms")
    lines.append(f"ttfb {_ms(s.ttfb_ns)} ms  {ttft}  "
                 f"gaps p50 {_ms(s.gap_p50_ns)} / p95 {_ms(s.gap_p95_ns)} / "
                 f"max {_ms(s.gap_max_ns)} ms  duration {_ms(s.duration_ns)} ms")
    epp = "-" if s.events_per_piece is None else f"{s.events_per_piece:.2f}"
    rate = "-" if s.tokens_per_s is None else f"{s.tokens_per_s:.1f}"
    lines.append(f"pieces {s.pieces}  events {s.events}  events/piece {epp}  "
                 f"tokens {s.tokens if s.tokens is not None else '-'}  tokens/s {rate}  "
                 f"stalls >{s.stall_ms:g} ms: {len(s.stalls)}")
    return lines
