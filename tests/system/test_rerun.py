"""``streamtape rerun``: recorded requests sent again to scripted backends, and ``diff`` of the result.

Real parts: the CLI (in-process, or a subprocess where a signal is sent),
scripted HTTP servers on 127.0.0.1 (tests/support/rerun_backends.py: a
faithful one, a slower one with a changed word, one that refuses, one that
hangs), ``streamtape record`` (mitmproxy) for a shadow session, vcrpy for an
imported cassette. The pure parts are tests/unit/test_rerun.py.
"""

from __future__ import annotations

import itertools
import json
import signal
import statistics
import time
from pathlib import Path

import pytest

import streamtape
from streamtape.cassette import Outcome
from tests.support.processes import STREAMTAPE, start
from tests.support.recording import recording, run_main
from tests.support.rerun_backends import (
    CHANGED,
    WORDS,
    Arrivals,
    faithful,
    hanging,
    slower,
    write_session,
)
from tests.support.servers import ScriptedServer, refused_port

OFFSETS = [0.0, 0.3, 0.3, 0.6, 1.0]
CHAT = "/v1/chat/completions"
SECRET = "new-backend-key-9b2f"


def backend(handler_arrivals: Arrivals, handler) -> ScriptedServer:
    return ScriptedServer({CHAT: handler_arrivals.stamped(handler)})


def rerun(capsys, session: Path, url: str, out: Path, *extra: str) -> tuple[int, str, str]:
    return run_main("rerun", session, "--upstream", url, "-o", out, *extra, capsys=capsys)


def diff_json(capsys, out: Path, *extra: str) -> tuple[int, dict[str, object]]:
    code, stdout, _ = run_main("diff", out, "--json", *extra, capsys=capsys)
    return code, json.loads(stdout)


@pytest.mark.slow
@pytest.mark.realtime
@pytest.mark.parametrize("speed", [1, 2])
def test_every_request_reaches_the_new_backend_once_at_its_recorded_offset(tmp_path, capsys, speed) -> None:
    session = write_session(tmp_path / "session.tape", OFFSETS)
    seen = Arrivals()
    with backend(seen, faithful()) as up:
        code, out, err = rerun(capsys, session, up.url, tmp_path / "out.tape", "--speed", str(speed))
    assert code == 0, err
    bodies = sorted(json.loads(r.body)["messages"][0]["content"] for r in seen.requests)
    assert bodies == [f"question {n}" for n in range(len(OFFSETS))]  # each once
    want = [o * 1000 / speed for o in OFFSETS]
    got = seen.offsets_ms()
    # Each arrival against its due offset, less the shift they all share (a late first
    # send moves every offset counted from it). 80 ms holds on a loaded 2-core machine
    # and still tells speed 1 (300, 600, 1000 ms) from speed 2 (150, 300, 500 ms).
    shift = statistics.median(g - w for g, w in zip(got, want, strict=True))
    assert all(abs(g - w - shift) < 80 for g, w in zip(got, want, strict=True)), (got, want)
    assert "sent 5/5  done 5  failed 0" in out


@pytest.mark.slow
def test_diff_of_a_rerun_against_the_faithful_backend_agrees_and_against_the_slower_one_differs(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0, 0.05, 0.1, 0.15])
    for name, handler, words in (("same", faithful(), WORDS), ("slow", slower(0.25), CHANGED)):
        with backend(Arrivals(), handler) as up:
            code, _, err = rerun(capsys, session, up.url, tmp_path / f"{name}.tape", "--name", name,
                                 "--slo", "ttft<150ms")
        assert code == 0, err
        got = streamtape.load(tmp_path / f"{name}.tape")
        assert len(got) == 8
        assert {ix.labels["role"] for ix in got} == {"primary", "shadow"}
        shadow = [ix for ix in got if ix.labels["role"] == "shadow"]
        assert all(ix.labels["backend"] == name and "rerun" in ix.labels for ix in shadow)
        assert words[5].encode() in shadow[0].response.body  # type: ignore[union-attr]
    code, same = diff_json(capsys, tmp_path / "same.tape")
    summary = same["summary"]
    assert code == 0 and summary["agree"] == 4 and summary["differ"] == 0  # type: ignore[index]
    code, slow = diff_json(capsys, tmp_path / "slow.tape")
    summary = slow["summary"]
    assert code == 1 and summary["agree"] == 0 and summary["differ"] == 4  # type: ignore[index]
    ttft = next(d for d in summary["timing"] if d["metric"] == "ttft")  # type: ignore[index]
    assert ttft["ratio_p50"] > 3  # 30 ms recorded against about 270 ms
    load = summary["load"]  # type: ignore[index]
    assert load["slo"] == "ttft<150ms"
    assert load["a"]["goodput_percent"] == 100.0 and load["b"]["goodput_percent"] == 0.0
    assert load["b"]["ttft_ns"]["p50"] > 200e6 and load["b"]["rps"] > 0
    assert load["b"]["itl_ns"]["p50"] > load["a"]["itl_ns"]["p50"]
    _, text, _ = run_main("diff", tmp_path / "slow.tape", "--slo", "ttft<1s", capsys=capsys)
    assert "goodput 100.0% (ttft<1s)" in text and "Load" in text
    run_main("diff", tmp_path / "slow.tape", "--html", tmp_path / "page.html", capsys=capsys)
    assert "<h3>Load</h3>" in (tmp_path / "page.html").read_text()


@pytest.mark.slow
def test_mapped_headers_and_model_reach_the_backend_and_the_header_value_never_the_file(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0, 0.02], headers=(("Authorization", "REDACTED"),))
    seen = Arrivals()
    with backend(seen, faithful()) as up:
        code, _, err = rerun(capsys, session, up.url, tmp_path / "out.tape",
                             "--header", f"Authorization=Bearer {SECRET}", "--model", "new-model")
    assert code == 0, err
    assert [r.header("authorization") for r in seen.requests] == [f"Bearer {SECRET}"] * 2
    assert {json.loads(r.body)["model"] for r in seen.requests} == {"new-model"}
    assert SECRET.encode() not in (tmp_path / "out.tape").read_bytes()
    shadow = [ix for ix in streamtape.load(tmp_path / "out.tape") if ix.labels["role"] == "shadow"]
    assert shadow[0].request.header("authorization") == "REDACTED"


def test_a_redacted_header_with_no_header_option_is_refused_in_one_line_and_nothing_is_sent(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0], headers=(("Authorization", "REDACTED"),))
    seen = Arrivals()
    with backend(seen, faithful()) as up:
        code, _, err = rerun(capsys, session, up.url, tmp_path / "out.tape")
    assert code == 2
    assert err.strip().splitlines() == [
        f"streamtape: error: {session}#0: its Authorization header was redacted when recorded; "
        "give it with --header Authorization=VALUE (or --header Authorization= to send none)"
    ]
    assert seen.requests == [] and not (tmp_path / "out.tape").exists()


@pytest.mark.slow
def test_a_refusing_backend_gives_each_request_its_outcome_and_exit_1(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0, 0.01, 0.02])
    with refused_port() as port:
        code, out, _ = rerun(capsys, session, f"http://127.0.0.1:{port}", tmp_path / "out.tape")
    assert code == 1
    shadow = [ix for ix in streamtape.load(tmp_path / "out.tape") if ix.labels["role"] == "shadow"]
    assert [(ix.outcome, ix.error, ix.response) for ix in shadow] == [
        (Outcome.UPSTREAM_ERROR, "connection refused", None)] * 3
    assert "failed: upstream_error 3" in out
    code, doc = diff_json(capsys, tmp_path / "out.tape")
    assert doc["summary"]["load"]["b"]["errors"] == {"upstream_error": 3}  # type: ignore[index]


@pytest.mark.slow
def test_a_hanging_backend_ends_each_request_at_the_timeout_and_exit_1(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0, 0.01])
    with backend(Arrivals(), hanging(10)) as up:
        started = time.monotonic()
        code, _, _ = rerun(capsys, session, up.url, tmp_path / "out.tape", "--timeout", "1")
        took = time.monotonic() - started
    assert code == 1 and took < 8
    shadow = [ix for ix in streamtape.load(tmp_path / "out.tape") if ix.labels["role"] == "shadow"]
    assert [(ix.outcome, ix.error) for ix in shadow] == [
        (Outcome.UPSTREAM_ERROR, "no complete answer within 1 s (--timeout)")] * 2


@pytest.mark.slow
def test_concurrency_caps_the_requests_in_flight_and_counts_the_late_sends(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0] * 6)
    seen = Arrivals()
    with backend(seen, slower(0.3)) as up:
        code, out, err = rerun(capsys, session, up.url, tmp_path / "out.tape", "--concurrency", "2")
    assert code == 0, err
    assert len(seen.requests) == 6 and seen.most_in_flight == 2
    assert "missed 4 send(s): 4 found 2 in flight" in out
    late = [ix.labels.get("late_ms") for ix in streamtape.load(tmp_path / "out.tape") if ix.labels["role"] == "shadow"]
    assert sum(v is not None for v in late) == 4 and all(float(v) > 200 for v in late if v is not None)


@pytest.mark.slow
def test_a_closed_loop_keeps_its_concurrency_busy_without_counting_misses(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0, 5.0, 9.0])
    seen = Arrivals()
    with backend(seen, faithful()) as up:
        code, out, _ = rerun(capsys, session, up.url, tmp_path / "out.tape", "--arrivals", "closed",
                             "--concurrency", "3", "--repeat", "3")
    assert code == 0 and len(seen.requests) == 9 and seen.most_in_flight <= 3
    assert "missed" not in out and seen.offsets_ms()[-1] < 2000  # the 9 s of recorded intervals are gone


@pytest.mark.slow
@pytest.mark.realtime
def test_a_fixed_rate_holds_its_number(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0, 0.5])
    seen = Arrivals()
    with backend(seen, faithful()) as up:
        code, _, err = rerun(capsys, session, up.url, tmp_path / "out.tape", "--rate", "20/s", "--repeat", "5")
    assert code == 0, err
    got = seen.offsets_ms()
    assert len(got) == 10
    assert abs(got[-1] - 450) < 100, got  # nine gaps of 50 ms (a loaded machine wakes late now and then)
    gaps = [b - a for a, b in itertools.pairwise(got)]
    assert statistics.median(gaps) == pytest.approx(50, abs=15), gaps


@pytest.mark.slow
def test_a_rerun_of_a_shadow_session_sends_the_primaries_and_diffs(tmp_path, capsys) -> None:
    import httpx

    from tests.support.builders import CHAT_BODY

    with (ScriptedServer({CHAT: faithful()}) as a, ScriptedServer({CHAT: slower(0.05)}) as b,
          recording(tmp_path / "shadow.tape", "--shadow", b.url, upstream=a.url) as rec):
        for _ in range(3):
            httpx.post(rec.url + CHAT, json=CHAT_BODY, timeout=10).raise_for_status()
        rec.wait_lines(3)
    seen = Arrivals()
    with backend(seen, faithful()) as c:
        code, _, err = rerun(capsys, tmp_path / "shadow.tape", c.url, tmp_path / "out.tape")
    assert code == 0, err
    assert len(seen.requests) == 3  # the primaries; the shadows answered the same calls
    code, doc = diff_json(capsys, tmp_path / "out.tape")
    assert code == 0 and doc["summary"]["agree"] == 3  # type: ignore[index]


@pytest.mark.slow
def test_a_rerun_of_an_imported_vcr_cassette_works(tmp_path, capsys) -> None:
    from tests.support.interop_capture import CHAT as VCR_CHAT
    from tests.support.interop_capture import upstream, vcr_httpx

    with upstream() as up:
        vcr_httpx(tmp_path / "calls.yaml", up.url)
    code, _, err = run_main("import", tmp_path / "calls.yaml", "-o", tmp_path / "calls.tape", capsys=capsys)
    assert code == 0, err
    seen = Arrivals()
    with upstream() as again, ScriptedServer({"*": seen.stamped(lambda req, c: again.routes[req.path](req, c))}) as front:
        code, _, err = rerun(capsys, tmp_path / "calls.tape", front.url, tmp_path / "out.tape", "-i", "0", "-i", "1")
    assert code == 0, err
    assert sorted(r.path for r in seen.requests) == sorted([VCR_CHAT, "/v1/gzip/chat/completions"])
    code, doc = diff_json(capsys, tmp_path / "out.tape")
    assert code == 0 and doc["summary"]["agree"] == 2  # type: ignore[index]


@pytest.mark.slow
def test_ctrl_c_stops_sending_ends_the_streams_in_flight_and_leaves_a_loadable_cassette(tmp_path) -> None:
    session = write_session(tmp_path / "session.tape", [0.0, 0.0, 30.0])
    seen = Arrivals()
    with backend(seen, hanging(30)) as up:
        child = start([*STREAMTAPE, "rerun", session, "--upstream", up.url, "-o", tmp_path / "out.tape",
                       "--drain-timeout", "0.5"], r"re-running \d+ request\(s\) of \S+ against (\S+)")
        with child:
            deadline = time.monotonic() + 10
            while len(seen.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            code = child.stop(signal.SIGINT)
    assert code == 1, child._tail()
    assert len(seen.requests) == 2  # the third was due 30 s later: never sent
    got = streamtape.load(tmp_path / "out.tape")
    shadow = [ix for ix in got if ix.labels["role"] == "shadow"]
    assert [ix.outcome for ix in shadow] == [Outcome.INTERRUPTED] * 2
    assert "stopped: sent 2/3" in "".join(child.out_lines)


@pytest.mark.slow
def test_merge_joins_two_reruns_into_one_session_that_diffs(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0, 0.01])
    with backend(Arrivals(), faithful()) as up:
        rerun(capsys, session, up.url, tmp_path / "one.tape", "-i", "0")
        rerun(capsys, session, up.url, tmp_path / "two.tape", "-i", "1")
    code, out, err = run_main("merge", tmp_path / "one.tape", tmp_path / "two.tape", "-o", tmp_path / "all.tape",
                              capsys=capsys)
    assert code == 0, err
    assert "merged 4 recording(s) of 2 cassette(s)" in out
    code, doc = diff_json(capsys, tmp_path / "all.tape")
    assert code == 0 and doc["summary"]["agree"] == 2  # type: ignore[index]
    code, _, err = run_main("merge", tmp_path / "one.tape", "-o", tmp_path / "all.tape", capsys=capsys)
    assert code == 2 and "exists already" in err


def test_locustfile_prints_the_path_of_the_shipped_locustfile(capsys) -> None:
    code, out, _ = run_main("rerun", "--locustfile", capsys=capsys)
    path = Path(out.strip())
    assert code == 0 and path.name == "locustfile.py" and path.is_file()


def test_an_existing_output_is_refused_unless_the_run_is_appended(tmp_path, capsys) -> None:
    session = write_session(tmp_path / "session.tape", [0.0])
    (tmp_path / "out.tape").write_bytes(b"")
    code, _, err = rerun(capsys, session, "http://127.0.0.1:9", tmp_path / "out.tape")
    assert code == 2 and err.strip() == (
        f"streamtape: error: -o {tmp_path / 'out.tape'}: exists already; give a new file, "
        "or --append to add this run to it")
