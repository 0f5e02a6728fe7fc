"""Resuming a recorded SSE stream after ``Last-Event-ID``, as an MCP server with an event store does.

A Streamable HTTP client whose stream was cut reconnects with a GET naming
the last event it saw (``Last-Event-ID``); the server replays the events of
that stream after it (MCP spec, "Resumability and Redelivery"). A replay has
the recorded stream: :func:`resume_after` is it from the event after the
named one, each piece at its recorded offset less the named event's, so
the gaps between the remaining events are the recorded ones. Pure code.
"""

from __future__ import annotations

import dataclasses

from ..cassette.model import Interaction
from ..cassette.pieces import Piece, Pieces
from ..shapes.sse import SSEEvent, SSEParser

__all__ = ["event_end", "resume_after"]


def event_end(ix: Interaction, event_id: str) -> tuple[int, int] | None:
    """Where the SSE event with id ``event_id`` ends in the recorded body (its byte offset)
    and when it came, or None when the stream has no such event (or is content-encoded)."""
    resp = ix.response
    if resp is None or resp.content_type != "text/event-stream":
        return None
    if (resp.header("content-encoding") or "identity").lower() != "identity":
        return None
    p = SSEParser()
    for piece in resp.pieces:
        for item in p.feed(piece.data, piece.at_ns):
            if isinstance(item, SSEEvent) and item.id == event_id:
                return item.end, item.at_ns
    return None


def resume_after(ix: Interaction, event_id: str) -> Interaction | None:
    """``ix`` with its body from the event after ``event_id`` on, or None when it has no
    such event. The head comes at once and the remaining pieces keep their gaps."""
    found = event_end(ix, event_id)
    if found is None or ix.response is None:
        return None
    cut, at = found
    pieces: list[Piece] = []
    offset = 0
    for piece in ix.response.pieces:
        end = offset + len(piece.data)
        if end > cut:
            data = piece.data[max(0, cut - offset):]
            pieces.append(Piece(max(0, piece.at_ns - at), data))
        offset = end
    response = dataclasses.replace(ix.response, pieces=Pieces.of(pieces), headers_at_ns=0)
    end_ns = None if ix.end_ns is None else max(0, ix.end_ns - at)
    return dataclasses.replace(ix, response=response, end_ns=end_ns, setup=None)
