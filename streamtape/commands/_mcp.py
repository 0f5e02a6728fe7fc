"""``streamtape show --mcp``: a cassette's MCP sessions, each one entry with its calls."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..cassette.model import Interaction
from ..fmt import ms
from ..mcp import McpCall, McpSession, sessions_of

__all__ = ["mcp_json", "mcp_lines", "mcp_text_lines"]


def _progress(c: McpCall) -> str:
    if not c.progress:
        return "-"
    last = c.progress[-1]
    total = f"/{last.total:g}" if last.total is not None else ""
    return f"{len(c.progress)} ({last.progress:g}{total})" if last.progress is not None else str(len(c.progress))


def _where(s: McpSession) -> str:
    """``#0-#6``, or ``#0-#2, #5`` for a session whose exchanges are not all together."""
    runs: list[list[int]] = []
    for i in sorted(s.indexes):
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"#{r[0]}" if len(r) == 1 else f"#{r[0]}-#{r[-1]}" for r in runs)


def mcp_lines(ixs: Sequence[Interaction]) -> list[str]:
    """One entry per session: a head line, then a row per call."""
    sessions = sessions_of(ixs)
    if not sessions:
        return ["no MCP sessions in this cassette"]
    out: list[str] = []
    for s in sessions:
        n = len(s.requests)
        out.append(
            f"MCP session {s.id or '(no session id)'}: {n} call{'s' if n != 1 else ''}, "
            f"{len(s.calls)} exchanges ({_where(s)}), {ms(s.duration_ns)} ms"
            + (f", server {s.server}" if s.server else "")
            + (f", protocol {s.protocol_version}" if s.protocol_version else ""))
        rows = [("#", "start ms", "dur ms", "status", "call", "progress", "outcome")]
        for c in s.calls:
            rows.append((str(c.index), ms(c.started_ns), ms(c.duration_ns),
                         "---" if c.status is None else str(c.status), c.label, _progress(c), c.outcome))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        right = {0, 1, 2, 3}
        for r in rows:
            out.append("  " + "  ".join(
                (v.rjust(w) if i in right else v.ljust(w)) for i, (v, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip())
        out.append("")
    return out[:-1]


def mcp_text_lines(ixs: Sequence[Interaction]) -> list[str]:
    """``--mcp --text``: each answered call's result text (a tool's content, a resource's
    contents, an error's message), under its call."""
    out: list[str] = []
    for s in sessions_of(ixs):
        for c in s.requests:
            if c.method in ("tools/call", "resources/read", "prompts/get") or c.error is not None:
                out.append(f"[{c.label}] {c.outcome}")
                out.extend(c.result_text().splitlines() or [""])
    return out


def _call_json(c: McpCall) -> dict[str, Any]:
    return {
        "index": c.index, "kind": c.kind, "http_method": c.http_method, "status": c.status,
        "method": c.method, "id": c.id, "name": c.name, "arguments": c.arguments,
        "start_ms": c.started_ns / 1e6,
        "duration_ms": None if c.duration_ns is None else c.duration_ns / 1e6,
        "progress": [{"offset_ms": p.at_ns / 1e6, "progress": p.progress, "total": p.total,
                      "message": p.message} for p in c.progress],
        "outcome": c.outcome, "result": c.result, "error": c.error,
        "text": c.result_text() if c.result is not None or c.error is not None else None,
        "server_messages": list(c.server_messages), "event_ids": list(c.event_ids),
    }


def mcp_json(ixs: Sequence[Interaction]) -> str:
    """``--mcp --json``: every session with its calls, results included."""
    return json.dumps([
        {"session": s.id, "server": s.server, "protocol_version": s.protocol_version,
         "interactions": sorted(s.indexes), "duration_ms": s.duration_ns / 1e6,
         "calls": [_call_json(c) for c in s.calls]}
        for s in sessions_of(ixs)
    ], indent=2, ensure_ascii=False)
