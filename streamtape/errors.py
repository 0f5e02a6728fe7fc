"""The exceptions a user can cause, one type per failure, each carrying its data.

The tree::

    StreamtapeError          a failure caused by input (base class)
    ├── CassetteError        a cassette file is missing, not a cassette, corrupt, or newer
    │   └── DamagedRecordError  a record read from a checksummed cassette does not check out
    ├── OptionError          an option value (CLI flag or mitmproxy ``--set``) is invalid
    │   ├── ShapeError       an unknown ``--shape``, or a shape that does not fit the wire
    │   ├── GateError        a malformed ``diff --fail-on`` timing gate
    │   └── RedactedValueError  a rerun request holds a redacted value no ``--header`` gives
    ├── MatrixRecordError    a pytest profile matrix case has no recording to replay: its recording failed
    ├── ProfileError         a replay profile is unknown or malformed
    ├── NoMatchError         no recording answers a request (``.request``, ``.closest``)
    │   └── McpOrderError    an MCP session's call is not its recorded next one (``.session``, ``.call``)
    ├── SessionError         an in-process transport matched a WebSocket session (``.index``)
    ├── UpstreamError        the upstream server could not be reached
    ├── WorkerError          a worker of ``serve --workers`` stopped on its own (``.index``)
    └── InteropError         a file to import is malformed, or an export cannot hold a recording

Every class here is exported from :mod:`streamtape` (``streamtape.NoMatchError``);
tests/unit/test_exports.py holds this tree to the classes and their bases.

Library code raises them with a message that already names the file, option
or request at fault, so an edge (the CLI, a mitmproxy addon) only has to show
``str(exc)`` as one line. What a failure means for a process (its exit status)
is decided at that edge, not here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .match.matcher import Closest, RequestKey


class StreamtapeError(Exception):
    """Base class: a failure caused by input, with a one-line message."""


class CassetteError(StreamtapeError):
    """A cassette file is missing, not a cassette, corrupt, or from a newer format."""


class DamagedRecordError(CassetteError):
    """A record of a checksummed cassette failed its check when it was read.

    ``path`` is the file, ``offset`` the record's byte, ``interaction`` the
    position of the interaction it belongs to (None when not known),
    ``reason`` what did not check out. ``streamtape verify`` lists every
    damaged record; ``streamtape repair`` writes what survives.
    """

    def __init__(self, path: object, offset: int, reason: str, interaction: int | None = None) -> None:
        who = f" (interaction #{interaction})" if interaction is not None else ""
        super().__init__(
            f"{path}: damaged record at byte {offset}{who}: {reason}; "
            f"'streamtape verify {path}' lists the damage, 'streamtape repair' saves the rest"
        )
        self.path = str(path)
        self.offset = offset
        self.reason = reason
        self.interaction = interaction

    def __reduce__(self) -> tuple[type[DamagedRecordError], tuple[str, int, str, int | None]]:
        return (DamagedRecordError, (self.path, self.offset, self.reason, self.interaction))


class OptionError(StreamtapeError):
    """An option value (CLI flag or mitmproxy ``--set``) is invalid."""


class ShapeError(OptionError):
    """An unknown shape name (``--shape``) or a shape that does not fit the stream's wire."""


class GateError(OptionError):
    """A ``diff --fail-on`` timing gate is malformed."""


class RedactedValueError(OptionError):
    """A recorded request to re-run holds a value the recorder replaced by ``REDACTED``
    (a header or a query parameter) that no ``--header`` gives: the word is never sent
    as if it were the secret.

    ``label`` names the recording (``FILE#N``), ``kind`` is ``header`` or ``query``,
    ``name`` the header's or the parameter's name.
    """

    def __init__(self, label: str, kind: str, name: str) -> None:
        how = (
            f"give it with --header {name}=VALUE (or --header {name}= to send none)"
            if kind == "header"
            else "re-record it with --no-redact or leave the request out"
        )
        super().__init__(f"{label}: its {name} {kind} was redacted when recorded; {how}")
        self.label = label
        self.kind = kind
        self.name = name

    def __reduce__(self) -> tuple[type[RedactedValueError], tuple[str, str, str]]:
        return (RedactedValueError, (self.label, self.kind, self.name))

class MatrixRecordError(StreamtapeError):
    """A case of a pytest profile matrix has no recording to replay.

    The first case of a matrix to run with no recording records it (under
    ``faithful``, against the upstream) and the others replay it. When that
    recording run failed, or another pytest-xdist worker's took too long, the
    other cases fail with this, naming the case and the cause, instead of
    sending the same requests upstream again.
    """


class ProfileError(StreamtapeError):
    """A replay profile is unknown or malformed."""


class NoMatchError(StreamtapeError):
    """No recorded interaction answers a request.

    ``request`` is the request as matching saw it (a
    :class:`~streamtape.match.matcher.RequestKey`: method, path, query, headers, body).
    ``closest`` is the recorded request that differs least and how it differs
    (a :class:`~streamtape.match.matcher.Closest`), or None: the cassette is empty, or
    with strict matching every recording that matches was already used. Both
    are None on an error built from its message alone (an unpickled one).
    :attr:`cassette` names the closest recording's cassette file when known.
    """

    def __init__(
        self,
        message: str,
        *,
        request: RequestKey | None = None,
        closest: Closest | None = None,
    ) -> None:
        super().__init__(message)
        self.request = request
        self.closest = closest

    @property
    def cassette(self) -> str | None:
        """The file name of the closest recording's cassette, or None when not known."""
        return self.closest.cassette if self.closest is not None else None


class McpOrderError(NoMatchError):
    """A replayed MCP client's call is not the recorded session's next call.

    ``session`` is the ``Mcp-Session-Id``, ``call`` the call's number in the
    session (``initialize`` is call 1); the message names
    the call the client sent, the recorded one and the first place they differ.
    """

    def __init__(self, message: str, *, session: str, call: int, request: RequestKey | None = None) -> None:
        super().__init__(message, request=request)
        self.session = session
        self.call = call

    def __reduce__(self) -> tuple[Any, ...]:
        return (_mcp_order_error, (str(self), self.session, self.call))


def _mcp_order_error(message: str, session: str, call: int) -> McpOrderError:
    return McpOrderError(message, session=session, call=call)


class SessionError(StreamtapeError):
    """A request replayed in-process matched a recorded WebSocket session.

    The SDKs open WebSocket connections on their own sockets, so a session
    replays only through the replay server (``ReplayServer.ws_url``).
    """

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index


class UpstreamError(StreamtapeError):
    """The upstream server could not be reached."""


class WorkerError(StreamtapeError):
    """A worker process of ``serve --workers`` stopped on its own (crashed or was killed).

    ``index`` is the worker's number, ``exitcode`` its exit status (negative:
    the signal that ended it); the others are stopped, so the port is never
    left half served.
    """

    def __init__(self, index: int, exitcode: int | None) -> None:
        super().__init__(
            f"serve: worker {index} stopped on its own (exit status {exitcode}); "
            "the other workers were stopped"
        )
        self.index = index
        self.exitcode = exitcode

    def __reduce__(self) -> tuple[type[WorkerError], tuple[int, int | None]]:
        return (WorkerError, (self.index, self.exitcode))


class InteropError(StreamtapeError):
    """A file to import (VCR.py cassette, HAR, mitmproxy flows) is malformed or of no known
    format, or an export cannot be written.

    ``path`` is the file at fault, ``problem`` what is wrong with it; the
    message is both, ``path: problem``.
    """

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem

    def __reduce__(self) -> tuple[type[InteropError], tuple[str, str]]:
        return (InteropError, (self.path, self.problem))
