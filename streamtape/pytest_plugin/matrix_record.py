"""A profile matrix with no recording yet: the first case to run records it, the others replay it.

A test marked ``profiles="adversarial"`` (or any list of profiles, or run with
``--streamtape-profile``) is one pytest case per profile, all sharing one
cassette. Under a record mode that records (``once`` with no cassette yet,
``all``, ``new_episodes``), each case recording for itself would send the same
requests to the real backend once per profile, and would hand the client the
live stream, not its profile's. Instead:

* whichever case of the matrix runs first, under the cassette's lock
  (:func:`streamtape.cassette.lock.hold`), records it: the test runs once
  against the upstream under ``faithful`` (``streamtape.profile`` and the
  ``streamtape_profile`` fixture say ``faithful``), and the recording is
  committed as any passing test's is (:mod:`.tapes`); then the same case runs
  again, its report being that run's, replaying the fresh cassette under its
  own profile. A ``faithful`` case records in its one run;
* every other case finds the recording (under the same lock, so a
  pytest-xdist worker whose case arrives while another worker records waits
  for it) and replays it under its profile;
* a recording run that fails leaves ``NAME.tape.failed``, labelled with the
  case: that case is reported with the recording run's failure, and the other
  cases fail with one line naming it (:class:`~streamtape.errors.MatrixRecordError`),
  never sending the requests upstream again. A skipped recording run is just
  that case's skip: the next case records.

A test with one profile that is not faithful (``profile="chunk=1"``, a
one-member ``profiles=`` list, one ``--streamtape-profile``) is not
parametrized, but records the same way, as a matrix of one: under
``faithful``, then again replaying the fresh recording under its profile,
that run's report being the test's. Recording live under no profile would
hand the client the upstream's stream, so the test would pass or fail on
what its profile never did to it. A test whose one profile is faithful
records in its one run, as any test.

No order is assumed (``-k``, ``-p randomly``, xdist's scheduling): what
decides is "no recording of this matrix in this run yet", read from the files
(:func:`~.tapes.matrix_step`) under the lock. A case's matrix is its cases that
differ from it only in profile (a test parametrized over ``n`` too records once
per ``n``), told apart in the cassette by the ``test`` label of each recorded
interaction.

The recording run is pytest's own protocol run once more on the item
(:func:`_pytest.runner.runtestprotocol` with ``log=False``, the re-run pytest
supports for pytest-rerunfailures), so its fixtures are set up and torn down
as for any run, and only the second run's reports are shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from _pytest.runner import runtestprotocol

from ..cassette.lock import hold
from ..errors import CassetteError, MatrixRecordError
from .recorder import stored_label
from .settings import FAITHFUL, MatrixProfile, RecordMode, TestSettings
from .tapes import Action, matrix_failed, matrix_step

T = TypeVar("T")

WAIT_S = 600.0
"""How long a case waits for another worker's recording of its matrix (a real LLM may be slow)."""

PROFILE_PARAM = "streamtape_profile"

REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
"""An item's latest report per phase (``setup``, ``call``, ``teardown``): the fixture commits a
recording only when the call passed."""


@dataclass(frozen=True)
class Plan:
    """What the ``streamtape`` fixture of one matrix case does in this run."""

    action: Action | None = None  # None: as any test (decide()); else this
    profile: str | None = None  # the profile of a recording run (faithful), else the case's own
    failure: MatrixRecordError | None = None  # fail at setup with this (no recording to replay)
    recorded_for: str | None = None  # this run records, for this (the cassette line says so)


_GROUP = pytest.StashKey[frozenset[str]]()
_LONE = pytest.StashKey[MatrixProfile]()
"""The one profile of a test that records as a matrix of one (it has no profile parameter)."""
_PLAN = pytest.StashKey[Plan]()
_KNOWN = pytest.StashKey[dict[tuple[Path, frozenset[str]], Plan]]()
"""Per session: the groups whose recording this process has settled (replay, or the failure)."""


def matrix_param(item: pytest.Item) -> MatrixProfile | None:
    """The profile of a case of a parametrized profile matrix (None: not one)."""
    callspec = getattr(item, "callspec", None)
    profile = callspec.params.get(PROFILE_PARAM) if callspec is not None else None
    return profile if isinstance(profile, MatrixProfile) else None


def matrix_profile(item: pytest.Item) -> MatrixProfile | None:
    """The profile of a case that records as a profile matrix: a parametrized matrix's case,
    or a test whose one profile is not faithful (a matrix of one, told by :func:`group_cases`).
    None: neither, the test records as any test."""
    return matrix_param(item) or item.stash.get(_LONE, None)


def group_cases(items: list[pytest.Item], settings_of: Callable[[pytest.Item], TestSettings | None]) -> None:
    """Give each matrix case the recording labels of its group (collection, every worker alike).

    A test with one profile that is not faithful is a group of its own (``settings_of``
    reads its profiles; None: a test it cannot read, which its fixture fails)."""
    groups: dict[tuple[str, tuple[tuple[str, int], ...]], list[pytest.Item]] = {}
    for item in items:
        if matrix_param(item) is None:
            _group_alone(item, settings_of)
            continue
        # The other parameters' values, by identity: every case of one parameter set holds the
        # same objects (pytest's indices number the product's cases, so they cannot tell).
        params = getattr(item, "callspec").params  # noqa: B009 - matrix_profile checked it is there
        others = tuple(sorted((k, id(v)) for k, v in params.items() if k != PROFILE_PARAM))
        groups.setdefault((item.nodeid.partition("[")[0], others), []).append(item)
    for cases in groups.values():
        labels = frozenset(stored_label(case.nodeid) for case in cases)
        for case in cases:
            case.stash[_GROUP] = labels


def _group_alone(item: pytest.Item, settings_of: Callable[[pytest.Item], TestSettings | None]) -> None:
    if PROFILE_PARAM not in getattr(item, "fixturenames", ()):
        return  # not a streamtape test
    settings = settings_of(item)
    lone = settings.lone_profile if settings is not None else None
    if lone is not None:
        item.stash[_LONE] = lone
        item.stash[_GROUP] = frozenset({stored_label(item.nodeid)})


def _drop(item: pytest.Item, key: pytest.StashKey[T]) -> None:
    if key in item.stash:
        del item.stash[key]


def plan_of(item: pytest.Item) -> Plan | None:
    return item.stash.get(_PLAN, None)


def run_case(
    item: pytest.Item,
    nextitem: pytest.Item | None,
    settings: TestSettings,
    run_started: float,
    show: Callable[[Path], str],
) -> bool | None:
    """``pytest_runtest_protocol`` for a matrix case: True when the case's run is over
    (its reports logged here), None to let pytest run it (with its plan set)."""
    _drop(item, _PLAN)
    profile = matrix_profile(item)
    group = item.stash.get(_GROUP, None)
    if profile is None or group is None or settings.record_mode is RecordMode.NONE:
        return None
    if "streamtape" not in getattr(item, "fixturenames", ()):
        return None  # only streamtape_profile: nothing to record, nothing to run twice
    known = item.config.stash.setdefault(_KNOWN, {})
    key = (settings.cassette, group)
    if key in known:
        item.stash[_PLAN] = known[key]
        return None
    cassette = settings.cassette
    if settings.record_mode is RecordMode.ONCE and matrix_step(RecordMode.ONCE, cassette, run_started, ()) is Action.REPLAY:
        known[key] = item.stash[_PLAN] = Plan(action=Action.REPLAY)  # an earlier run's cassette
        return None
    cassette.parent.mkdir(parents=True, exist_ok=True)
    try:
        lock = hold(cassette, WAIT_S, shared=True)
    except CassetteError as e:
        # Remembered: the matrix's other cases in this process fail at once, not after as long again.
        failure = MatrixRecordError(f"waiting for this profile matrix's recording: {e}")
        known[key] = item.stash[_PLAN] = Plan(failure=failure)
        return None
    try:
        step = matrix_step(settings.record_mode, cassette, run_started, group)
        if not isinstance(step, Action):  # a message (Action is a str too)
            known[key] = item.stash[_PLAN] = Plan(failure=MatrixRecordError(f"{show(cassette)}: {step}"))
            return None
        if step is Action.REPLAY:
            known[key] = item.stash[_PLAN] = Plan(action=Action.REPLAY)
            return None
        return _record(item, nextitem, profile, step, key, known, show(cassette), settings.upstream)
    finally:
        lock.release()


def _record(
    item: pytest.Item,
    nextitem: pytest.Item | None,
    profile: MatrixProfile,
    action: Action,
    key: tuple[Path, frozenset[str]],
    known: dict[tuple[Path, frozenset[str]], Plan],
    shown: str,
    upstream: str | None,
) -> bool | None:
    """This case records its matrix (the lock is held)."""
    ihook = item.ihook
    faithful = profile.faithful
    alone = _LONE in item.stash
    recorded_for = f"its profile {profile.id}" if alone else "its profile matrix"
    item.stash[_PLAN] = Plan(action=action, profile=None if faithful else FAITHFUL, recorded_for=recorded_for)
    if faithful:  # its own run records: nothing to replay after it
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        _settle(item, reports, key, known, shown)
        return True
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    _drop(item, REPORTS)  # the next run's teardown must not see this run's call report
    if _settle(item, reports, key, known, shown):
        item.stash[_PLAN] = Plan(action=Action.REPLAY)
        return None  # pytest runs the case again: the replay under its profile, outside the lock
    why = "had no recording to replay under its profile" if alone else "ran first with no recording of its profile matrix"
    note = (
        f"{item.nodeid} {why}: it ran against {upstream} under {FAITHFUL} to record {shown}, "
        f"and that run did not pass (above), so it was not replayed under {profile.id}"
    )
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in reports:
        if report.failed:
            report.sections.append(("streamtape", note))
        ihook.pytest_runtest_logreport(report=report)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _settle(
    item: pytest.Item,
    reports: list[pytest.TestReport],
    key: tuple[Path, frozenset[str]],
    known: dict[tuple[Path, frozenset[str]], Plan],
    shown: str,
) -> bool:
    """Remember how the recording run went; True when it passed (its recording is the cassette).
    A skipped run settles nothing: the next case of the matrix records."""
    if all(r.passed for r in reports):
        known[key] = Plan(action=Action.REPLAY)
        return True
    if any(r.failed for r in reports):
        why = matrix_failed(item.nodeid, key[0], alone=_LONE in item.stash)
        known[key] = Plan(failure=MatrixRecordError(f"{shown}: {why}"))
    return False
