"""The recording options, each declared once: the mitmproxy option and the ``streamtape record`` flag.

:data:`RECORD_OPTIONS` is the one list. The recording addon declares its
``--set`` options from it (:meth:`streamtape.mitm.record.RecordAddon.load`,
listed by ``mitmdump -s addons/record.py --options``); ``streamtape record``
derives its click flags from it and hands what they say to the addon as the
same options (:mod:`streamtape.commands.record`). So ``streamtape record``
with no flags records exactly as ``mitmdump -s addons/record.py`` with no
``--set``.

A flag is derived from its option's name unless the declaration spells it
(``--redact-header``, singular because it is repeated): the name without
``streamtape_``, dashes for underscores (``streamtape_redact_query`` is
``--redact-query``). A boolean's flag takes no value and turns the option
away from its default, so it is named for what it does: ``--all``
(``streamtape_all``, default false), ``--no-redact`` (``streamtape_redact``,
default true).

Three kinds, read the way both addons read their options
(:mod:`streamtape.mitm.options`):

- :class:`StrOption`: a string;
- :class:`BoolOption`: true or false, declared to mitmproxy as an optional
  string and parsed by :func:`~streamtape.mitm.options.parse_bool` (a bool
  value mitmproxy cannot convert would drop the whole script silently);
- :class:`ListOption`: several values, repeated or comma separated
  (:func:`~streamtape.mitm.options.split_values`), one flag per value.

This module imports neither mitmproxy nor click: every ``streamtape`` run
imports it (for the ``record`` command's flags), and mitmproxy takes most of
a second to import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from .options import OptStr, parse_bool, split_values

PREFIX = "streamtape_"
"""Every recording option's name starts with it; a derived flag leaves it out."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordOption:
    """One option of the recording addon and its ``streamtape record`` flag (a kind below)."""

    name: str
    """The mitmproxy option: ``--set name=value``; also the flag's click parameter name."""
    help: str
    """Its line in ``mitmdump --options``."""
    cli_help: str
    """The flag's line in ``streamtape record --help``."""
    flag: str = ""
    """The long flag; left empty, it is derived from :attr:`name` (see the module)."""
    short: str = ""
    """A one-letter flag as well (``-o``), or empty."""
    metavar: str | None = None
    """What the flag's value is called in the help (``FILE``); a boolean has none."""

    typespec: ClassVar[type]
    """The type mitmproxy's loader is given for the option."""

    def __post_init__(self) -> None:
        if not self.name.startswith(PREFIX):
            raise ValueError(f"a recording option's name starts with {PREFIX!r}: {self.name!r}")
        if not self.flag:
            object.__setattr__(self, "flag", self._derived_flag())

    def _derived_flag(self) -> str:
        return "--" + self.name.removeprefix(PREFIX).replace("_", "-")

    @property
    def flags(self) -> tuple[str, ...]:
        """The flag's spellings, as click takes them: ``("-o", "--out")``."""
        return (self.short, self.flag) if self.short else (self.flag,)

    @property
    def mitm_default(self) -> object:
        """The default as mitmproxy holds it (and ``--options`` shows it)."""
        raise NotImplementedError

    def from_flag(self, given: Any) -> object:
        """The option's value for what the flag gave (click's value; the default when left out)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True, kw_only=True)
class StrOption(RecordOption):
    """A string: ``--set streamtape_out=FILE``, ``-o FILE``."""

    default: str

    typespec: ClassVar[type] = str

    @property
    def mitm_default(self) -> str:
        return self.default

    def read(self, options: Any) -> str:
        """The value in mitmproxy's options (``ctx.options``)."""
        return str(getattr(options, self.name))

    def from_flag(self, given: str) -> str:
        return given


@dataclass(frozen=True, slots=True, kw_only=True)
class BoolOption(RecordOption):
    """True or false: ``--set streamtape_all=true``; the flag (``--all``) turns it from its default."""

    default: bool

    typespec: ClassVar[type] = OptStr

    def _derived_flag(self) -> str:
        name = self.name.removeprefix(PREFIX).replace("_", "-")
        return f"--no-{name}" if self.default else f"--{name}"

    @property
    def mitm_default(self) -> str:
        return "true" if self.default else "false"

    def read(self, options: Any) -> bool:
        """The value in mitmproxy's options, parsed (:func:`~streamtape.mitm.options.parse_bool`)."""
        return parse_bool(self.name, getattr(options, self.name))

    def from_flag(self, given: bool) -> str:
        """``given``: whether the flag was given (it takes no value)."""
        return "true" if given != self.default else "false"


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOption(RecordOption):
    """Several values: ``--set streamtape_label=a=1,b=2`` or repeated; the flag is repeated."""

    typespec: ClassVar[type] = cast(type, Sequence[str])

    @property
    def mitm_default(self) -> list[str]:
        return []

    def read(self, options: Any) -> list[str]:
        """The values in mitmproxy's options, each comma-separated item on its own."""
        return split_values(getattr(options, self.name))

    def from_flag(self, given: Sequence[str]) -> list[str]:
        return list(given)


OUT = StrOption(
    name="streamtape_out", short="-o", default="streamtape.tape", metavar="FILE",
    help="Cassette file to append recordings to.",
    cli_help="Cassette to append to.",
)
LABEL = ListOption(
    name="streamtape_label", metavar="KEY=VALUE",
    help="KEY=VALUE label stored with every interaction.",
    cli_help="Label stored with every interaction.",
)
ALL = BoolOption(
    name="streamtape_all", default=False,
    help="Record every response, not only streaming ones (true/false).",
    cli_help="Record every response, not only streaming ones.",
)
FILTER = StrOption(
    name="streamtape_filter", default="", metavar="EXPR",
    help="Record only flows matching this mitmproxy filter expression.",
    cli_help="Record only flows matching a mitmproxy filter expression.",
)
REDACT = BoolOption(
    name="streamtape_redact", default=True,
    help="Redact API keys, tokens and cookies at record time (true/false).",
    cli_help="Keep API keys, tokens and cookies in the cassette.",
)
REDACT_HEADERS = ListOption(
    name="streamtape_redact_headers", flag="--redact-header", metavar="NAME",
    help="More header names to redact.",
    cli_help="Another header to redact.",
)
REDACT_QUERY = ListOption(
    name="streamtape_redact_query", metavar="NAME",
    help="More query parameters to redact.",
    cli_help="Another query parameter to redact.",
)
REDACT_FIELDS = ListOption(
    name="streamtape_redact_fields", flag="--redact-field", metavar="NAME",
    help="JSON or form request-body fields to redact (and the same fields of a JSON answer).",
    cli_help="A JSON or form request-body field to redact (and the same field of a JSON answer).",
)

RECORD_OPTIONS: tuple[RecordOption, ...] = (
    OUT, LABEL, ALL, FILTER, REDACT, REDACT_HEADERS, REDACT_QUERY, REDACT_FIELDS,
)
"""Every recording option, in the order ``streamtape record --help`` lists the flags."""

OPTION_NAMES = frozenset(o.name for o in RECORD_OPTIONS)
"""The mitmproxy option names: a change to any of them reconfigures the addon."""


def naming_the_flag(message: str) -> str:
    """An addon's message about an option (``streamtape_out: ...``), naming the flag instead
    (both spellings when it has a short one: ``-o/--out``, whichever the user typed).

    ``streamtape record`` passes the flags on as options, so the addon's
    messages name the option; the user typed the flag.
    """
    name, sep, rest = message.partition(": ")
    for o in RECORD_OPTIONS:
        if sep and name == o.name:
            return f"{o.short}/{o.flag}: {rest}" if o.short else f"{o.flag}: {rest}"
    return message
