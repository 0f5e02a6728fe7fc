"""Protocol findings about one WebSocket session: pure, from its :class:`SessionAnalysis`.

The findings a session can have, in the vocabulary of :mod:`streamtape.check`:

- ``outcome``: the session did not end with a close frame exchange (the
  connection dropped, the recording stopped);
- ``close-abnormal``: it closed with a code other than 1000, 1001 or none
  (1005), or the connection ended without a close frame;
- ``no-response-done``: a Realtime response was created (or asked for with
  ``response.create``) and the session ended before its ``response.done``. A
  server that closes with 1000 in the middle of a response gives this alone:
  the close looks clean, and a client that stops at the close (the openai
  SDK's realtime client does) takes the truncated answer for a finished one;
- ``error-event``: a Realtime ``error`` event (it does not close the socket,
  so nothing else shows it).
"""

from __future__ import annotations

from ..cassette.model import Interaction, Outcome
from ..shapes.realtime import SessionAnalysis, analyze_session, error_message
from . import Finding


def _short(text: str, n: int = 60) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= n else text[: n - 1] + "…"


def check_session(ix: Interaction, analysis: SessionAnalysis | None = None) -> list[Finding]:
    """Findings about one WebSocket session (empty when nothing is wrong)."""
    a = analysis if analysis is not None else analyze_session(ix)
    out: list[Finding] = []
    if ix.outcome is not Outcome.COMPLETE:
        out.append(Finding("outcome", f"outcome {ix.outcome}" + (f": {ix.error}" if ix.error else "")))
    if a.close_code is None:
        if ix.outcome is not Outcome.INTERRUPTED:  # the recording stopped: the outcome says it all
            who = f" ({a.closed_by}'s side)" if a.closed_by else ""
            out.append(Finding("close-abnormal", f"the connection ended without a close frame{who}"))
    elif not a.clean_close:
        reason = f" ({a.close_reason})" if a.close_reason else ""
        by = f" by the {a.closed_by}" if a.closed_by else ""
        out.append(Finding("close-abnormal", f"closed with code {a.close_code}{reason}{by}"))
    for r in a.open_responses:
        said = f"; its text so far: {_short(r.text)!r}" if r.text else ""
        out.append(Finding(
            "no-response-done",
            f"response {r.id} ended without response.done ({r.deltas} text delta"
            f"{'s' if r.deltas != 1 else ''}{said})",
            next((e.index for e in a.events if e.at_ns == r.created_at_ns), None),
        ))
    if a.unanswered and not a.open_responses:
        out.append(Finding(
            "no-response-done",
            f"{a.unanswered} response.create without a response: the session ended first",
        ))
    for e in a.errors:
        out.append(Finding("error-event", f"error event: {_short(error_message(e), 100)}", e.index))
    return out
