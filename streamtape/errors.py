"""The exceptions a user can cause. The CLI turns each into one line on stderr.

Every user-facing failure has exactly one type here; library code raises
them with a message that already names the file, option or request at fault,
so the CLI only has to print ``str(exc)``.
"""

from __future__ import annotations


class StreamtapeError(Exception):
    """Base class: a failure caused by input, with a one-line message."""

    exit_code = 2


class CassetteError(StreamtapeError):
    """A cassette file is missing, not a cassette, corrupt, or from a newer format."""


class OptionError(StreamtapeError):
    """An option value (CLI flag or mitmproxy ``--set``) is invalid."""


class ShapeError(OptionError):
    """An unknown shape name (``--shape``) or a shape that does not fit the stream's wire."""


class GateError(OptionError):
    """A ``diff --fail-on`` timing gate is malformed."""


class ProfileError(StreamtapeError):
    """A replay profile is unknown or malformed."""


class NoMatchError(StreamtapeError):
    """No recorded interaction answers a request."""


class UpstreamError(StreamtapeError):
    """The upstream server could not be reached."""
