"""Each recording option is declared once (streamtape.mitm.record_options): the
``streamtape record`` flag and the mitmproxy ``--set`` option both come from it,
with the same default, so the command and ``mitmdump -s addons/record.py``
record alike."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import click
import pytest
from mitmproxy.test import taddons

from streamtape.commands.record import mitm_options, record
from streamtape.mitm import record_options as option
from streamtape.mitm.record import RecordAddon
from streamtape.mitm.record_options import (
    OPTION_NAMES,
    RECORD_OPTIONS,
    RecordOption,
    naming_the_flag,
)


def _params() -> dict[str, click.Parameter]:
    return {p.name: p for p in record.params if p.name is not None}


def _flags_given(*args: str) -> dict[str, Any]:
    """What ``streamtape record ARGS`` hands its function, as click parses it."""
    return dict(record.make_context("record", list(args)).params)


@pytest.fixture
def addon_options() -> Iterator[Any]:
    """mitmproxy's options once the recording addon is loaded (nothing set)."""
    with taddons.context(RecordAddon(on_error=lambda message: None)) as tctx:
        yield tctx.options


@pytest.mark.parametrize("o", RECORD_OPTIONS, ids=lambda o: o.name)
def test_every_recording_option_is_a_flag_of_streamtape_record(o: RecordOption) -> None:
    param = _params().get(o.name)
    assert isinstance(param, click.Option)
    assert param.opts == list(o.flags)
    assert param.help == o.cli_help


@pytest.mark.parametrize("o", RECORD_OPTIONS, ids=lambda o: o.name)
def test_every_recording_option_is_an_option_of_the_addon_with_the_same_default_as_its_flag(
    o: RecordOption, addon_options: Any
) -> None:
    assert o.name in addon_options
    assert getattr(addon_options, o.name) == o.mitm_default == o.from_flag(_flags_given()[o.name])


def test_streamtape_record_without_flags_sets_every_option_to_the_addons_default(addon_options: Any) -> None:
    assert mitm_options(_flags_given(), confdir=None, insecure=False) == {
        name: getattr(addon_options, name) for name in OPTION_NAMES
    }


def test_the_addon_has_no_streamtape_option_that_is_not_declared(addon_options: Any) -> None:
    assert {k for k, _ in addon_options.items() if k.startswith("streamtape_")} == OPTION_NAMES


def test_no_option_is_declared_twice() -> None:
    assert len(OPTION_NAMES) == len(RECORD_OPTIONS)
    names = Counter(p.name for p in record.params)
    spellings = Counter(s for p in record.params for s in (*p.opts, *p.secondary_opts))
    assert [n for n, k in names.items() if k > 1] == []
    assert [s for s, k in spellings.items() if k > 1] == []


def test_a_flag_is_the_option_name_with_dashes_unless_the_declaration_spells_it() -> None:
    assert option.REDACT_QUERY.flag == "--redact-query"
    assert option.FILTER.flag == "--filter"
    assert option.OUT.flags == ("-o", "--out")
    assert option.REDACT_HEADERS.flag == "--redact-header"  # spelled: singular, as it is repeated


def test_a_boolean_flag_is_named_for_turning_the_option_from_its_default() -> None:
    assert option.ALL.flag == "--all"  # default false
    assert option.REDACT.flag == "--no-redact"  # default true


def test_the_flags_reach_the_addon_as_its_options() -> None:
    given = _flags_given(
        "-o", "x.tape", "--label", "a=1", "--label", "b=2", "--all", "--filter", "~u /v1",
        "--no-redact", "--redact-header", "X-Key", "--redact-query", "sig", "--redact-field", "secret",
    )
    assert mitm_options(given, confdir=None, insecure=False) == {
        "streamtape_out": "x.tape",
        "streamtape_label": ["a=1", "b=2"],
        "streamtape_all": "true",
        "streamtape_filter": "~u /v1",
        "streamtape_redact": "false",
        "streamtape_redact_headers": ["X-Key"],
        "streamtape_redact_query": ["sig"],
        "streamtape_redact_fields": ["secret"],
    }


def test_confdir_and_insecure_set_mitmproxys_own_options_only_when_given() -> None:
    assert {"confdir", "ssl_insecure"}.isdisjoint(mitm_options(_flags_given(), confdir=None, insecure=False))
    options = mitm_options(_flags_given(), confdir="/c", insecure=True)
    assert options["confdir"] == "/c" and options["ssl_insecure"] is True


def test_the_addon_reads_each_option_by_its_kind() -> None:
    addon = RecordAddon(on_error=lambda message: None)
    with taddons.context(addon) as tctx:
        tctx.configure(addon, streamtape_all="yes", streamtape_label=["a=1,b=2", "c=3"])
        assert addon.failed is None
        assert addon.record_all is True
        assert addon.labels == {"a": "1", "b": "2", "c": "3"}


def test_a_bad_set_value_names_the_option() -> None:
    addon = RecordAddon(on_error=lambda message: None)
    with taddons.context(addon) as tctx:
        tctx.configure(addon, streamtape_redact="maybe")
        assert addon.failed is not None and addon.failed.startswith("streamtape_redact: invalid value 'maybe'")


def test_in_streamtape_record_an_error_about_an_option_names_the_flag_the_user_typed() -> None:
    message = "streamtape_filter: invalid filter expression '~q ~~'"
    assert naming_the_flag(message) == "--filter: invalid filter expression '~q ~~'"
    assert naming_the_flag("streamtape_out: no cassette file given") == "-o/--out: no cassette file given"
    assert naming_the_flag("cannot write x.tape: disk full") == "cannot write x.tape: disk full"


def test_the_declarations_import_neither_mitmproxy_nor_click() -> None:
    # Every `streamtape` run imports them, for the record command's flags.
    code = (
        "import sys, streamtape.mitm.record_options; "
        "print(sorted(m for m in ('mitmproxy', 'click') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
