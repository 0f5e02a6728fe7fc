"""What the two mitmproxy addons (recording and replay) share: options and failing loudly.

mitmproxy runs on with an addon silently inactive when it cannot convert a
``--set`` value (``streamtape_redact=maybe`` on a ``bool`` option drops the
whole script without a word). A streamtape addon must never do that, so both
addons:

- declare their booleans as optional strings and parse them with
  :func:`parse_bool`, one rule for all (mitmproxy's own: a value left out, or
  empty, means true);
- split list options with :func:`split_values` (repeated, or comma separated);
- report a configuration failure once, through the caller's ``on_error`` or
  mitmproxy's log, and stop the proxy at startup instead of running without
  the addon (:class:`FailLoudly`).

Every ``streamtape`` run imports this module (the ``record`` command's flags
come from :mod:`.record_options`, which reads its options with these rules),
so it imports mitmproxy, most of a second's work, only inside the methods
that talk to a running proxy.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Optional, cast

from ..errors import OptionError

log = logging.getLogger("streamtape")

# mitmproxy compares option types with ``typing.Optional[str]``; its Loader
# annotates the type argument as ``type``, which a typing form is not.
OptStr = cast(type, Optional[str])  # noqa: UP045

_TRUE = ("true", "yes", "1", "on", "")
_FALSE = ("false", "no", "0", "off")


def split_values(values: Sequence[str] | str) -> list[str]:
    """A list option's items: each value may hold several, separated by commas."""
    if isinstance(values, str):
        values = [values]
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def parse_bool(name: str, value: str | None) -> bool:
    """``true``/``false`` (and yes/no, 1/0, on/off), case-insensitive.

    As for mitmproxy's own boolean options, a value left out (``--set name``
    gives None) or empty (``--set name=``) means true.
    """
    if value is None:
        return True
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise OptionError(f"{name}: invalid value {value!r} (expected true or false)")


class FailLoudly:
    """Failure handling for a streamtape addon (mixed into both; defines no hook).

    ``on_error`` receives each failure as one line; without it the line goes
    to mitmproxy's log at error level, where an error logged during startup
    makes ``mitmdump`` exit. :attr:`failed` holds the configuration failure
    that keeps the addon from working, or None.
    """

    activity = "streamtape"
    """What stops working when the addon fails (``recording``, ``replay``)."""

    def __init__(self, on_error: Callable[[str], None] | None) -> None:
        self.on_error = on_error
        self.failed: str | None = None

    def report(self, message: str) -> None:
        """Say ``message`` once: to ``on_error``, else to mitmproxy's log."""
        if self.on_error:
            self.on_error(message)
        else:
            log.error(f"streamtape: {message}")

    def fail(self, message: str) -> None:
        """The addon cannot work: remember why and say it."""
        self.failed = message
        self.report(message)

    def check_deferred(self) -> None:
        """Fail on every ``--set streamtape_*`` value mitmproxy could not convert.

        Such a value stays in ``options.deferred`` and mitmproxy says nothing.
        """
        from mitmproxy import ctx  # late: see the module docstring

        bad = {k: v for k, v in ctx.options.deferred.items() if k.startswith("streamtape_")}
        for name, value in bad.items():
            raw = getattr(value, "val", value)
            shown = raw[0] if isinstance(raw, list) and len(raw) == 1 else raw
            self.fail(f"invalid value {shown!r} for option {name}")

    def stop_if_failed(self) -> bool:
        """At startup: when the addon failed, stop the proxy and return True.

        Never run on with the addon inactive: ``mitmdump`` exits on an error
        logged during startup, and the proxy is shut down in any case.
        """
        if self.failed is None:
            return False
        if not self.on_error:
            log.error(f"streamtape: {self.activity} disabled: {self.failed}")
        from mitmproxy import ctx  # late: see the module docstring

        with contextlib.suppress(Exception):
            ctx.master.shutdown()
        return True
