"""``streamtape record --shadow``: each pair's lines go out together, the primary first."""

from __future__ import annotations

import pytest

from streamtape.commands.record import _Run, _shadow_plan
from streamtape.shadow import ShadowTarget
from streamtape.shadow.labels import LABEL_PAIR
from tests.support.builders import interaction, wait_until


def _run() -> _Run:
    plan = _shadow_plan("http://127.0.0.1:9", ("http://127.0.0.1:10", "http://127.0.0.1:11"),
                        (), (), (), (), 4, 5.0, False, {})
    return _Run("out.tape", "http://127.0.0.1:9", plan, own_thread=True)


def _ix(pair: str, path: str):
    return interaction([b"data: x\n\n"], url=f"http://127.0.0.1:9{path}", labels={LABEL_PAIR: pair})


def _target(run: _Run, i: int) -> ShadowTarget:
    assert run.plan is not None
    return run.plan.targets[i]


def test_a_slow_shadow_keeps_its_pairs_lines_together_and_another_pair_never_lands_between(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = _run()
    run.shadow_finished(_target(run, 0), _ix("r-1", "/one"))  # a shadow before its primary
    run.saved(_ix("r-1", "/one"))
    run.saved(_ix("r-2", "/two"))  # the second pair is whole first
    run.shadow_finished(_target(run, 0), _ix("r-2", "/two"))
    run.shadow_finished(_target(run, 1), _ix("r-2", "/two"))
    run.shadow_finished(_target(run, 1), _ix("r-1", "/one"))  # the first pair's slow shadow
    lines = capsys.readouterr().out.splitlines()
    assert [(" /one " in x, x.startswith("  shadow")) for x in lines] == [
        (False, False), (False, True), (False, True),
        (True, False), (True, True), (True, True),
    ]


def test_a_hanging_shadow_holds_its_pair_at_most_the_wait_then_comes_on_its_own(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_Run, "PAIR_WAIT_S", 0.05)
    run = _run()
    run.saved(_ix("r-1", "/one"))
    run.shadow_finished(_target(run, 0), _ix("r-1", "/one"))
    assert capsys.readouterr().out == ""
    lines = wait_until(lambda: capsys.readouterr().out.splitlines() or None, 5)
    assert len(lines) == 2 and "/one" in lines[0] and lines[1].startswith("  shadow")
    run.shadow_finished(_target(run, 1), _ix("r-1", "/one"))  # long after
    late = capsys.readouterr().out.splitlines()
    assert len(late) == 1 and late[0].startswith("  shadow")


def test_at_the_end_a_pair_still_waiting_goes_out_together_its_primary_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = _run()
    run.shadow_finished(_target(run, 1), _ix("r-1", "/one"))
    run.not_saved(_ix("r-1", "/one"))  # one shadow never ended
    run.shadow_finished(_target(run, 0), _ix("r-2", "/two"))  # a primary never saved
    assert capsys.readouterr().out == ""
    run.flush_pairs()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert "/one" in lines[0] and "[not saved]" in lines[0]
    assert lines[1].startswith("  shadow") and "/one" in lines[1]
    assert lines[2].startswith("  shadow") and "/two" in lines[2]
