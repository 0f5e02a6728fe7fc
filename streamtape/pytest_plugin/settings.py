"""What one test asks of streamtape: cassette, record mode, upstream, profiles. No I/O but ``stat``.

Resolved twice from the same inputs: at collection (so a bad marker value, an
unknown profile or a recording with no upstream is a collection error naming
the value) and when the ``streamtape`` fixture is set up.

Precedence, most specific first (as pytest-recording's ``vcr`` marker over its
``--record-mode``): the marker on the test, then its class, then its module;
then the command line; then the environment; then the default.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from ..errors import OptionError, StreamtapeError
from ..profiles import ADVERSARIAL, parse_profile
from ..wire import NO_MATCH_STATUS

if TYPE_CHECKING:
    from ..transport.replayer import NoMatchMode

MARKER = "streamtape"
ENV_RECORD_MODE = "STREAMTAPE_RECORD_MODE"
ENV_UPSTREAM = "STREAMTAPE_UPSTREAM"
INI_CASSETTE_DIR = "streamtape_cassette_dir"
DEFAULT_CASSETTE_DIR = "cassettes"
ALL_ADVERSARIAL = "adversarial:*"
FAITHFUL = "faithful"
SUFFIX = ".tape"

T = TypeVar("T")


class RecordMode(StrEnum):
    """When a test talks to the real backend; pytest-recording's names and meanings.

    ``all`` replaces the cassette (what pytest-recording calls ``rewrite``;
    VCR.py's ``all`` appends): appending would leave the old recordings first
    in line for every identical request.
    """

    NONE = "none"  # replay only; a missing cassette or an unmatched request fails the test
    ONCE = "once"  # record when the cassette does not exist, else as none
    NEW_EPISODES = "new_episodes"  # replay what matches, record the rest into the same file
    ALL = "all"  # record everything again; the new recording replaces the file


RECORD_MODES = tuple(m.value for m in RecordMode)

PROFILE_SETS: Mapping[str, Mapping[str, str]] = {"adversarial": ADVERSARIAL}
"""Named profile sets for ``profiles="NAME"``: member name (the test id) -> profile text."""

REPLAY_OPTIONS = ("ignore_fields", "match_headers", "strict", "strict_nulls", "seed", "no_match")
MARKER_KEYS = (
    "cassette",
    "profile",
    "profiles",
    "record_mode",
    "upstream",
    "realtime",
    *REPLAY_OPTIONS,
)


@dataclass(frozen=True)
class MatrixProfile:
    """One profile of a test's profile list: its test id and its text."""

    id: str
    text: str

    def __str__(self) -> str:
        return self.id

    @property
    def faithful(self) -> bool:
        """Whether it replays as recorded (``faithful``, however spelled): a run under it
        that records hands the client what a replay under it would."""
        return parse_profile(self.text) == parse_profile(FAITHFUL)


@dataclass(frozen=True)
class RunOptions:
    """The run-wide inputs: command line, ini file and environment, read once."""

    record_mode: RecordMode | None
    record_mode_source: str
    upstream: str | None
    upstream_source: str
    profiles: tuple[str, ...]
    cassette_dir: Path | None  # None: ``cassettes`` beside each test file

    @classmethod
    def of(cls, config: pytest.Config) -> RunOptions:
        """Read and check the run-wide options (raises :class:`OptionError`)."""
        mode, source = _cli_or_env(config, "--streamtape-record-mode", ENV_RECORD_MODE, record_mode)
        upstream, up_source = _cli_or_env(config, "--streamtape-upstream", ENV_UPSTREAM, check_upstream)
        profiles = tuple(config.getoption("streamtape_profile") or ())
        try:
            expand_profiles(profiles)  # each one parsed: a bad one is an error now
        except StreamtapeError as e:
            raise OptionError(f"--streamtape-profile: {e}") from None
        raw_dir = str(config.getini(INI_CASSETTE_DIR) or "").strip()
        cassette_dir = None
        if raw_dir:
            base = config.inipath.parent if config.inipath else config.rootpath
            cassette_dir = base / raw_dir
        return cls(mode, source or "default", upstream, up_source, profiles, cassette_dir)


def _cli_or_env(
    config: pytest.Config, flag: str, env: str, check: Callable[[object, str], T]
) -> tuple[T | None, str]:
    """The value of command-line option ``flag``, else of environment variable ``env``,
    checked by ``check`` (which names where a bad one came from), and that source;
    ``(None, "")`` when neither is set. The command line wins."""
    cli = config.getoption(flag)
    if cli:
        return check(cli, flag), flag
    from_env = os.environ.get(env, "").strip()
    if from_env:
        return check(from_env, env), env
    return None, ""


def record_mode(value: object, where: str) -> RecordMode:
    """A record mode by name (raises :class:`OptionError` naming the value and where it came from)."""
    if isinstance(value, str) and value.strip().lower() in RECORD_MODES:
        return RecordMode(value.strip().lower())
    raise OptionError(f"{where}: unknown record mode {value!r} (expected one of {', '.join(RECORD_MODES)})")


def check_upstream(url: object, where: str) -> str:
    """The upstream a marker, ini or command-line option names: an origin, checked as
    ``record --upstream`` checks it (:func:`streamtape.shadow.targets.backend_url`)."""
    from ..shadow.targets import backend_url

    if not isinstance(url, str):
        raise OptionError(f"{where}: expected an http:// or https:// URL, not {url!r}")
    return backend_url(where, url.strip(), path=False).rstrip("/")


def expand_profiles(texts: Sequence[str]) -> list[MatrixProfile]:
    """Profiles with ``adversarial:*`` expanded (ids: the member names, as for
    ``profiles="adversarial"``); each one parsed
    (raises :class:`~streamtape.errors.ProfileError` for a bad one)."""
    out: list[MatrixProfile] = []
    for text in texts:
        if not isinstance(text, str):
            raise OptionError(f"a profile is text, not {text!r}")
        if text.strip() == ALL_ADVERSARIAL:
            out.extend(MatrixProfile(name, prof) for name, prof in ADVERSARIAL.items())
        else:
            parse_profile(text)
            out.append(MatrixProfile(text, text))
    return out


def profile_set(value: object) -> list[MatrixProfile]:
    """``profiles=``: the name of a profile set (ids are the member names) or a list of profiles."""
    if isinstance(value, str):
        members = PROFILE_SETS.get(value.strip().lower())
        if members is None:
            raise OptionError(
                f"profiles={value!r}: unknown profile set (sets: {', '.join(PROFILE_SETS)}; "
                "or a list of profiles; profile= names one)"
            )
        return [MatrixProfile(name, text) for name, text in members.items()]
    if isinstance(value, Sequence) and value:
        return expand_profiles(list(value))
    raise OptionError(f"profiles={value!r}: expected a profile set name or a non-empty list of profiles")


def marker_kwargs(node: pytest.Item | pytest.Collector) -> dict[str, object]:
    """The ``streamtape`` markers' arguments merged: module, then class, then test (the
    nearest wins); a positional argument is the cassette. Unknown names are an error."""
    merged: dict[str, object] = {}
    for marker in reversed(list(node.iter_markers(MARKER))):
        kwargs = dict(marker.kwargs)
        if marker.args:
            if len(marker.args) > 1 or "cassette" in kwargs:
                raise OptionError("streamtape marker: give the cassette once (one positional argument or cassette=)")
            kwargs["cassette"] = marker.args[0]
        unknown = sorted(set(kwargs) - set(MARKER_KEYS))
        if unknown:
            raise OptionError(
                f"streamtape marker: unknown argument {unknown[0]!r} (known: {', '.join(MARKER_KEYS)})"
            )
        if "profile" in kwargs:
            merged.pop("profiles", None)
        if "profiles" in kwargs:
            merged.pop("profile", None)
        merged.update(kwargs)
    return merged


def _safe_name(name: str) -> str:
    for ch in '<>?%*:|"\'/\\':
        name = name.replace(ch, "-")
    return name


def default_cassette(test_file: Path, cls_name: str | None, function: str, cassette_dir: Path | None) -> Path:
    """``<dir>/<test module name>/<test name>.tape``; ``<dir>`` is ``cassettes`` beside the
    test file unless ``streamtape_cassette_dir`` names one. A method's name is
    ``Class.method``. Every parameter set of a test shares its file."""
    base = cassette_dir if cassette_dir is not None else test_file.parent / DEFAULT_CASSETTE_DIR
    name = f"{cls_name}.{function}" if cls_name else function
    return base / test_file.stem / f"{_safe_name(name)}{SUFFIX}"


@dataclass(frozen=True)
class TestSettings:
    """Everything the fixture needs to know about one test, checked."""

    __test__ = False  # not a pytest test class, whatever its name

    cassettes: tuple[Path, ...]
    default_cassette: bool
    record_mode: RecordMode
    record_mode_source: str
    upstream: str | None
    upstream_source: str
    profiles: tuple[MatrixProfile, ...]
    matrix_source: str  # "profile=", "profiles=", "--streamtape-profile" or "" (the default)
    realtime: bool
    ignore_fields: tuple[str, ...]
    match_headers: tuple[str, ...]
    strict: bool
    strict_nulls: bool
    seed: int | None
    no_match: NoMatchMode

    @property
    def cassette(self) -> Path:
        """The cassette file a recording goes to (the first one named)."""
        return self.cassettes[0]

    @property
    def is_matrix(self) -> bool:
        """Whether the test is one pytest case per profile (several profiles)."""
        return len(self.profiles) > 1

    @property
    def lone_profile(self) -> MatrixProfile | None:
        """The profile of a test with one profile that is not faithful, else None.

        Such a test is not parametrized (its node id names no profile), but it records as a
        profile matrix of one (:mod:`.matrix_record`): recording live under no profile would
        hand the client the upstream's stream, not its profile's.
        """
        if len(self.profiles) == 1 and not self.profiles[0].faithful:
            return self.profiles[0]
        return None

    def records_at_start(self) -> bool:
        """Whether this test would talk to the upstream if it started now."""
        if self.record_mode in (RecordMode.ALL, RecordMode.NEW_EPISODES):
            return True
        return self.record_mode is RecordMode.ONCE and not self.cassette.exists()

    def mode_text(self) -> str:
        where = "" if self.record_mode_source == "default" else f" ({self.record_mode_source})"
        return f"record_mode={self.record_mode.value}{where}"


def _strings(value: object, name: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(str(v) for v in value)
    raise OptionError(f"{name}={value!r}: expected a name or a list of names")


def resolve(
    kwargs: Mapping[str, object],
    run: RunOptions,
    test_file: Path,
    cls_name: str | None,
    function: str,
) -> TestSettings:
    """Check and combine one test's marker arguments with the run's options.

    Raises :class:`~streamtape.errors.StreamtapeError` (its message names the
    bad value) for any misuse.
    """
    raw = kwargs.get("cassette")
    if raw is None:
        paths: tuple[Path, ...] = (default_cassette(test_file, cls_name, function, run.cassette_dir),)
    else:
        items = [raw] if isinstance(raw, str | os.PathLike) else raw
        if not isinstance(items, Sequence) or not items or not all(isinstance(i, str | os.PathLike) for i in items):
            raise OptionError(f"cassette={raw!r}: expected a path or a list of paths")
        paths = tuple(p if (p := Path(i)).is_absolute() else test_file.parent / p for i in items)

    if "record_mode" in kwargs:
        mode, mode_source = record_mode(kwargs["record_mode"], "record_mode"), "marker"
    elif run.record_mode is not None:
        mode, mode_source = run.record_mode, run.record_mode_source
    else:
        mode, mode_source = RecordMode.NONE, "default"

    if kwargs.get("upstream") is not None:
        upstream: str | None = check_upstream(kwargs["upstream"], "upstream")
        up_source = "marker"
    else:
        upstream, up_source = run.upstream, run.upstream_source

    if "profiles" in kwargs:
        profiles, matrix_source = profile_set(kwargs["profiles"]), "profiles="
    elif "profile" in kwargs:
        marked = kwargs["profile"]
        texts = [marked] if isinstance(marked, str) else marked
        if not isinstance(texts, Sequence) or not texts:
            raise OptionError(f"profile={marked!r}: expected a profile or a list of profiles")
        profiles, matrix_source = expand_profiles(list(texts)), "profile="
    elif run.profiles:
        profiles, matrix_source = expand_profiles(run.profiles), "--streamtape-profile"
    else:
        profiles, matrix_source = [MatrixProfile(FAITHFUL, FAITHFUL)], ""

    from ..transport.replayer import no_match_status  # late: the transports are not needed yet

    status = no_match_status(kwargs.get("no_match", NO_MATCH_STATUS))  # OptionError: not one
    no_match: NoMatchMode = "raise" if status is None else status
    seed = kwargs.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise OptionError(f"seed={seed!r}: expected a whole number")

    settings = TestSettings(
        cassettes=paths,
        default_cassette=raw is None,
        record_mode=mode,
        record_mode_source=mode_source,
        upstream=upstream,
        upstream_source=up_source,
        profiles=tuple(profiles),
        matrix_source=matrix_source,
        realtime=bool(kwargs.get("realtime", True)),
        ignore_fields=_strings(kwargs.get("ignore_fields", ()), "ignore_fields"),
        match_headers=_strings(kwargs.get("match_headers", ()), "match_headers"),
        strict=bool(kwargs.get("strict", False)),
        strict_nulls=bool(kwargs.get("strict_nulls", False)),
        seed=seed,
        no_match=no_match,
    )
    _check_recording(settings)
    return settings


def _check_recording(s: TestSettings) -> None:
    """The combinations that cannot record: caught before any test runs. A profile matrix
    can record (its first case records, :mod:`.matrix_record`): it needs what any recording does."""
    if not s.records_at_start():
        return
    if len(s.cassettes) > 1 or s.cassette.is_dir():
        raise OptionError(
            f"{s.mode_text()} records into one cassette file; cassette= names "
            f"{'a folder' if s.cassette.is_dir() else f'{len(s.cassettes)} files'}"
        )
    if s.upstream is None:
        raise OptionError(
            f"{s.mode_text()} needs the real backend to record {s.cassette}: "
            f"--streamtape-upstream URL, {ENV_UPSTREAM}=URL or upstream= in the marker"
        )


__all__ = [
    "ALL_ADVERSARIAL",
    "MARKER",
    "PROFILE_SETS",
    "RECORD_MODES",
    "MatrixProfile",
    "RecordMode",
    "RunOptions",
    "StreamtapeError",
    "TestSettings",
    "default_cassette",
    "expand_profiles",
    "marker_kwargs",
    "resolve",
]
