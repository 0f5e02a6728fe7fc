"""Capture: turning what a proxy sees into cassette records, with no sockets and no files.

The sans-I/O half of recording, in h11's manner: the drivers in
:mod:`streamtape.mitm` feed these classes values (a request, a response head,
a body piece and its time, the end) and hand the records they give to a
writer (:mod:`streamtape.cassette.writer`). So recording is tested without a
proxy, and every driver records the same way.

- :mod:`.recorder`: :class:`~.recorder.Recorder`, HTTP interactions: pieces,
  batching, setup marks, labels, what counts as a stream;
- :mod:`.websocket`: :class:`~.websocket.SessionRecorder`, the same for a
  WebSocket session's messages;
- :mod:`.redaction`: what is redacted at record time (headers, query
  parameters, JSON body fields), on by default;
- :mod:`.credentials`: values that look like credentials where no rule
  redacts them (a warning names each one);
- :mod:`.upstream_error`: the sentence a client gets when the upstream gave
  no response (refused, unresolvable, an untrusted certificate, closed early).
"""

from .recorder import Recorder, Redaction
from .websocket import SessionRecorder

__all__ = ["Recorder", "Redaction", "SessionRecorder"]
