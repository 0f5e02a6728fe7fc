"""A profile matrix with no cassette yet, under a record mode that records: the first case to run
records the real upstream once (under faithful), every case replays that recording under its
profile, in the same pytest run, in any order, with -k, and across pytest-xdist workers.

pytest runs generated test modules in-process (pytester); the upstream is a real OpenAI-shaped
streaming server on 127.0.0.1 that counts what it receives; recording goes through the plugin's
real in-process mitmproxy recorder. Each generated test appends what it saw (its case id, its
action, its profile) to ``runs.txt``, so the tests below see which case recorded and which replayed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import streamtape
from streamtape.cassette.lock import CassetteLock, lock_path
from streamtape.cassette.lock import hold as real_hold
from streamtape.profiles import ADVERSARIAL
from streamtape.pytest_plugin import matrix_record
from tests.support.builders import chat_events, chat_ix
from tests.support.pytester_runs import (  # imports mitmproxy once, before any run
    asyncio_project,
    run,
)
from tests.support.servers import Conn, Received, ScriptedServer, sse_events

pytest_plugins = ["pytester"]

needs_openai = pytest.mark.skipif(
    importlib.util.find_spec("openai") is None,
    reason="the openai SDK needs httpx2, left out of the test extra on Python 3.11",
)

PRELUDE = '''
import json, os, pytest

def ask(client, prompt):
    """The assembled answer of a chat stream, read whole (so every adversarial profile passes)."""
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": prompt}]}
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        data = b"".join(r.iter_bytes())
    text = ""
    for event in data.decode().split("\\n\\n"):
        event = "".join(line for line in event.split("\\n") if not line.startswith(":"))
        if event.startswith("data: {"):
            text += json.loads(event[6:])["choices"][0]["delta"].get("content") or ""
    return text

def note(request, streamtape):
    with open(request.config.rootpath / "runs.txt", "a") as f:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "")
        callspec = getattr(request.node, "callspec", None)  # a test with one profile has none
        case = callspec.id if callspec is not None else request.node.name
        f.write(f"{case}|{streamtape.action}|{streamtape.profile}|{worker}\\n")
'''

MATRIX = PRELUDE + '''
@pytest.mark.streamtape(profiles="adversarial")
def test_matrix(streamtape, request):
    note(request, streamtape)
    with streamtape.client() as c:
        assert ask(c, "hi") == "Echo: hi ☃"
        assert ask(c, "bye") == "Echo: bye ☃"
'''


def echo(req: Received, conn: Conn) -> None:
    prompt = json.loads(req.body)["messages"][-1]["content"]
    sse_events(chat_events(["Echo", ": ", prompt, " ☃"]), gap=0.002)(req, conn)


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    """A real OpenAI-shaped streaming backend on 127.0.0.1 that echoes the prompt."""
    with ScriptedServer({"/v1/chat/completions": echo}) as server:
        yield server


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return asyncio_project(pytester)


def record(pytester: pytest.Pytester, upstream: ScriptedServer, *args: str, mode: str = "once") -> pytest.RunResult:
    return run(pytester, f"--streamtape-record-mode={mode}", "--streamtape-upstream", upstream.url, *args)


def cassette_of(pytester: pytest.Pytester, test: str, module: str = "test_m") -> Path:
    return pytester.path / "cassettes" / module / f"{test}.tape"


def prompts(received: list[Received]) -> list[str]:
    return [json.loads(r.body)["messages"][-1]["content"] for r in received]


def runs(pytester: pytest.Pytester, workers: set[str] | None = None) -> list[tuple[str, str, str]]:
    """What each run of a generated test saw: (case id, action, profile), and forget it;
    ``workers`` gets the pytest-xdist workers that ran them."""
    path = pytester.path / "runs.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    fields = [line.split("|") for line in lines]
    if workers is not None:
        workers.update(f[3] for f in fields)
    return [(f[0], f[1], f[2]) for f in fields]


def recorders(seen: list[tuple[str, str, str]]) -> list[str]:
    return [case for case, action, _profile in seen if action == "record"]


# -- once: one recording, the whole matrix replays it ----------------------------------------


def test_under_once_the_first_case_records_the_upstream_once_and_every_case_replays_it_under_its_profile(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    project.makepyfile(test_m=MATRIX)
    result = record(project, upstream, "-v")
    result.assert_outcomes(passed=len(ADVERSARIAL))
    assert prompts(upstream.received) == ["hi", "bye"]  # one request per distinct call, for nine cases
    seen = runs(project)
    [first] = recorders(seen)
    assert (first, "record", "faithful") in seen  # the recording run is faithful, against the upstream
    replays = sorted((case, profile) for case, action, profile in seen if action == "replay")
    assert replays == sorted(ADVERSARIAL.items())  # every case, the recorder too, replays under its own
    cas = streamtape.load(cassette_of(project, "test_matrix"))
    assert [json.loads(ix.request.body)["messages"][0]["content"] for ix in cas] == ["hi", "bye"]
    assert {ix.labels["test"] for ix in cas} == {f"test_m.py::test_matrix[{first}]"}
    result.stdout.fnmatch_lines([
        "*streamtape cassettes*",
        f"cassettes/test_m/test_matrix.tape: created with 2 interactions from {upstream.url} "
        f"(recorded by test_m.py::test_matrix[[]{first}[]] under faithful for its profile matrix)",
    ])
    result.stdout.fnmatch_lines(["*streamtape profile matrix*", "test_m.py::test_matrix * 9 profiles  passed under all"])
    assert not list(cassette_of(project, "test_matrix").parent.glob(".*"))  # no recording or lock left

    upstream.__exit__()  # the backend is gone: the same command replays the whole matrix
    again = record(project, upstream)
    again.assert_outcomes(passed=len(ADVERSARIAL))
    assert recorders(runs(project)) == []
    assert len(upstream.received) == 2
    run(project).assert_outcomes(passed=len(ADVERSARIAL))


def test_one_adversarial_case_selected_alone_records_then_replays_under_its_profile(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    project.makepyfile(test_m=MATRIX)
    record(project, upstream, "-k", "utf8-split").assert_outcomes(passed=1, deselected=len(ADVERSARIAL) - 1)
    assert runs(project) == [
        ("utf8-split", "record", "faithful"),
        ("utf8-split", "replay", ADVERSARIAL["utf8-split"]),
    ]
    assert prompts(upstream.received) == ["hi", "bye"]
    upstream.__exit__()
    run(project).assert_outcomes(passed=len(ADVERSARIAL))  # the whole matrix replays that recording


def test_deselecting_the_first_case_leaves_the_recording_to_whichever_case_runs_first(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    first, second = list(ADVERSARIAL)[:2]
    project.makepyfile(test_m=MATRIX)
    record(project, upstream, "-k", f"not {first}").assert_outcomes(passed=len(ADVERSARIAL) - 1, deselected=1)
    assert recorders(runs(project)) == [second]
    assert len(upstream.received) == 2
    record(project, upstream, "-k", first).assert_outcomes(passed=1, deselected=len(ADVERSARIAL) - 1)
    assert runs(project) == [(first, "replay", ADVERSARIAL[first])]  # once: the cassette exists now


def test_a_faithful_case_arriving_first_records_in_its_one_run_and_a_cut_fails_where_the_test_expects_it(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    project.makepyfile(
        test_m=PRELUDE
        + '''
@pytest.mark.streamtape(profiles=["faithful", "adversarial:bytes-1", "instant;fault=cut:40%"])
def test_list(streamtape, request):
    note(request, streamtape)
    with streamtape.client() as c:
        if "cut" in streamtape.profile:
            with pytest.raises(Exception, match="(?i)incomplete|peer closed|closed|cut"):
                ask(c, "hi")
        else:
            assert ask(c, "hi") == "Echo: hi ☃"
'''
    )
    result = record(project, upstream, "-v")
    result.assert_outcomes(passed=3)
    seen = runs(project)
    assert seen[0] == ("faithful", "record", "faithful")  # its own profile is faithful: one run, live
    assert [s[:2] for s in seen[1:]] == [("adversarial:bytes-1", "replay"), ("instant;fault=cut:40%", "replay")]
    assert prompts(upstream.received) == ["hi"]


def test_cases_differing_in_another_parameter_record_once_per_parameter_set(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    project.makepyfile(
        test_m=PRELUDE
        + '''
@pytest.mark.parametrize("prompt", ["a", "b"])
@pytest.mark.streamtape(profiles=["adversarial:events", "adversarial:bytes-1"])
def test_p(streamtape, request, prompt):
    note(request, streamtape)
    with streamtape.client() as c:
        assert ask(c, prompt) == f"Echo: {prompt} ☃"
'''
    )
    record(project, upstream).assert_outcomes(passed=4)
    assert sorted(prompts(upstream.received)) == ["a", "b"]
    assert len(recorders(runs(project))) == 2
    assert len(streamtape.load(cassette_of(project, "test_p"))) == 2
    upstream.__exit__()
    run(project).assert_outcomes(passed=4)


def test_a_matrix_from_the_command_line_records_each_test_once(project: pytest.Pytester, upstream: ScriptedServer) -> None:
    project.makepyfile(
        test_m=PRELUDE
        + '''
def test_one(streamtape):
    with streamtape.client() as c:
        assert ask(c, "one") == "Echo: one ☃"

def test_two(streamtape):
    with streamtape.client() as c:
        assert ask(c, "two") == "Echo: two ☃"
'''
    )
    record(project, upstream, "--streamtape-profile", "adversarial:*").assert_outcomes(passed=2 * len(ADVERSARIAL))
    assert prompts(upstream.received) == ["one", "two"]


# -- one profile: a matrix of one --------------------------------------------------------------

CUT = "instant;fault=cut:40%"

LONE = PRELUDE + '''
@pytest.mark.streamtape(MARK)
def test_lone(streamtape, request):
    note(request, streamtape)
    with streamtape.client() as c:
        if "cut" in streamtape.profile:  # the replay under the profile: the stream is cut
            with pytest.raises(Exception, match="(?i)incomplete|peer closed|closed|cut"):
                ask(c, "hi")
        else:  # the recording run, live under faithful
            assert ask(c, "hi") == "Echo: hi ☃"
'''


@pytest.mark.parametrize(
    ("mark", "args"),
    [
        (f"profile={CUT!r}", ()),
        (f"profiles=[{CUT!r}]", ()),
        ("", ("--streamtape-profile", CUT)),
    ],
    ids=["profile=", "profiles=[one]", "--streamtape-profile"],
)
def test_one_non_faithful_profile_records_the_upstream_once_under_faithful_then_replays_under_its_profile(
    project: pytest.Pytester, upstream: ScriptedServer, mark: str, args: tuple[str, ...]
) -> None:
    """Recording live under no profile would hand the client the whole stream, and the test
    would pass or fail on what its profile never did to it: a matrix of one, as any matrix."""
    project.makepyfile(test_m=LONE.replace("MARK", mark))
    result = record(project, upstream, *args)
    result.assert_outcomes(passed=1)
    assert prompts(upstream.received) == ["hi"]  # once: the replay run sends nothing upstream
    assert runs(project) == [("test_lone", "record", "faithful"), ("test_lone", "replay", CUT)]
    cas = streamtape.load(cassette_of(project, "test_lone"))
    assert [ix.labels["test"] for ix in cas] == ["test_m.py::test_lone"]  # its node id: no [profile]
    result.stdout.fnmatch_lines([
        "*streamtape cassettes*",
        f"cassettes/test_m/test_lone.tape: created with 1 interaction from {upstream.url} "
        f"(recorded by test_m.py::test_lone under faithful for its profile {CUT})",
    ])
    result.stdout.no_fnmatch_line("*streamtape profile matrix*")  # one profile: no matrix summary

    upstream.__exit__()  # the backend is gone: the cassette replays under the profile
    record(project, upstream, *args).assert_outcomes(passed=1)
    assert runs(project) == [("test_lone", "replay", CUT)]
    run(project, *args).assert_outcomes(passed=1)
    assert len(upstream.received) == 1


@pytest.mark.parametrize("mark", ["", 'profile="faithful"', 'profiles=["faithful"]'])
def test_one_faithful_profile_records_in_its_one_run(
    project: pytest.Pytester, upstream: ScriptedServer, mark: str
) -> None:
    project.makepyfile(test_m=LONE.replace("MARK", mark))
    record(project, upstream).assert_outcomes(passed=1)
    assert runs(project) == [("test_lone", "record", "faithful")]
    assert prompts(upstream.received) == ["hi"]
    assert len(streamtape.load(cassette_of(project, "test_lone"))) == 1


def test_one_profile_on_a_parametrized_test_records_once_per_parameter_set(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    project.makepyfile(
        test_m=PRELUDE
        + f'''
@pytest.mark.parametrize("prompt", ["a", "b"])
@pytest.mark.streamtape(profile={CUT!r})
def test_p(streamtape, request, prompt):
    note(request, streamtape)
    with streamtape.client() as c:
        if "cut" in streamtape.profile:
            with pytest.raises(Exception, match="(?i)incomplete|peer closed|closed|cut"):
                ask(c, prompt)
        else:
            assert ask(c, prompt) == f"Echo: {{prompt}} ☃"
'''
    )
    record(project, upstream).assert_outcomes(passed=2)
    assert prompts(upstream.received) == ["a", "b"]
    assert runs(project) == [
        ("a", "record", "faithful"), ("a", "replay", CUT), ("b", "record", "faithful"), ("b", "replay", CUT),
    ]
    assert len(streamtape.load(cassette_of(project, "test_p"))) == 2


def test_one_profile_whose_recording_run_fails_is_reported_with_that_failure_and_writes_no_cassette(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    project.makepyfile(
        test_m=PRELUDE
        + f'''
@pytest.mark.streamtape(profile={CUT!r})
def test_lone(streamtape, request):
    note(request, streamtape)
    with streamtape.client() as c:
        assert ask(c, "hi") == "something the backend never says"
'''
    )
    result = record(project, upstream)
    result.assert_outcomes(failed=1)
    assert runs(project) == [("test_lone", "record", "faithful")]  # not replayed
    assert len(upstream.received) == 1
    path = cassette_of(project, "test_lone")
    assert not path.exists()
    failed = path.with_name(path.name + ".failed")
    assert {ix.labels["test"] for ix in streamtape.load(failed)} == {"test_m.py::test_lone"}
    result.stdout.fnmatch_lines([
        "*AssertionError*",
        f"*test_m.py::test_lone had no recording to replay under its profile: it ran against {upstream.url} "
        f"under faithful to record cassettes/test_m/test_lone.tape, and that run did not pass (above), so it "
        f"was not replayed under {CUT}",
    ])


# -- when the recording run fails ---------------------------------------------------------------


def test_a_failing_recording_run_fails_its_case_and_the_other_cases_error_in_one_line_without_the_upstream(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    project.makepyfile(
        test_m=PRELUDE
        + '''
@pytest.mark.streamtape(profiles="adversarial")
def test_matrix(streamtape, request):
    note(request, streamtape)
    with streamtape.client() as c:
        assert ask(c, "hi") == "something the backend never says"
'''
    )
    result = record(project, upstream)
    result.assert_outcomes(failed=1, errors=len(ADVERSARIAL) - 1)
    assert len(upstream.received) == 1
    [first] = recorders(runs(project))
    path = cassette_of(project, "test_matrix")
    assert not path.exists()
    failed = path.with_name(path.name + ".failed")
    assert {ix.labels["test"] for ix in streamtape.load(failed)} == {f"test_m.py::test_matrix[{first}]"}
    result.stdout.fnmatch_lines([
        "*AssertionError*",
        f"*test_m.py::test_matrix[[]{first}[]] ran first with no recording of its profile matrix: it ran "
        f"against {upstream.url} under faithful to record cassettes/test_m/test_matrix.tape, and that run "
        f"did not pass (above), so it was not replayed under {first}",
    ])
    result.stdout.fnmatch_lines([
        f"streamtape: cassettes/test_m/test_matrix.tape: test_m.py::test_matrix[[]{first}[]] ran first "
        "with no recording of this profile matrix and failed while it recorded it in this run (its recording "
        "is in test_matrix.tape.failed): there is nothing to replay, and its requests are not sent upstream again",
    ])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_a_skipped_recording_run_leaves_the_recording_to_the_next_case(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    first = next(iter(ADVERSARIAL))
    project.makepyfile(
        test_m=MATRIX.replace("    note(request, streamtape)\n", f"    if {first!r} in request.node.name:\n"
                              "        pytest.skip('not this one')\n    note(request, streamtape)\n", 1)
    )
    record(project, upstream).assert_outcomes(passed=len(ADVERSARIAL) - 1, skipped=1)
    assert len(recorders(runs(project))) == 1
    assert len(upstream.received) == 2


# -- the other record modes -------------------------------------------------------------------------


def test_under_all_one_case_records_again_and_replaces_the_cassette_and_the_others_replay_it(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    path = cassette_of(project, "test_matrix")
    path.parent.mkdir(parents=True)
    streamtape.save(path, [chat_ix()])  # an earlier recording of "hi" alone
    project.makepyfile(test_m=MATRIX)
    record(project, upstream, mode="all").assert_outcomes(passed=len(ADVERSARIAL))
    assert prompts(upstream.received) == ["hi", "bye"]
    assert len(recorders(runs(project))) == 1
    assert len(streamtape.load(path)) == 2


def test_under_new_episodes_one_case_records_what_the_cassette_lacks_and_the_others_replay(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    path = cassette_of(project, "test_matrix")
    path.parent.mkdir(parents=True)
    hi = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    streamtape.save(path, [chat_ix(1, body=hi, events=chat_events(["Echo", ": ", "hi", " ☃"]))])
    project.makepyfile(test_m=MATRIX)
    record(project, upstream, mode="new_episodes").assert_outcomes(passed=len(ADVERSARIAL))
    assert prompts(upstream.received) == ["bye"]  # "hi" was replayed to the recording run
    assert [a for _c, a, _p in runs(project)].count("extend") == 1
    assert len(streamtape.load(path)) == 2


def test_under_none_a_matrix_with_no_cassette_fails_every_case_naming_the_file(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    project.makepyfile(test_m=MATRIX)
    result = run(project, "--streamtape-upstream", upstream.url)
    result.assert_outcomes(failed=len(ADVERSARIAL))
    result.stdout.fnmatch_lines(["*streamtape: cassettes/test_m/test_matrix.tape: no such cassette file (record_mode=none*"])
    assert upstream.received == []


# -- pytest-xdist ------------------------------------------------------------------------------------


def slow_echo(req: Received, conn: Conn) -> None:
    prompt = json.loads(req.body)["messages"][-1]["content"]
    sse_events(chat_events(["Echo", ": ", prompt, " ☃"]), gap=0.1)(req, conn)


def test_two_xdist_workers_record_a_matrix_once_and_replay_it(project: pytest.Pytester) -> None:
    """Each worker starts a case at once; the recording takes over a second (slow events), so
    the other worker's first case waits on the cassette's lock, then replays."""
    pytest.importorskip("xdist")
    project.makepyfile(test_m=MATRIX)
    with ScriptedServer({"/v1/chat/completions": slow_echo}) as upstream:
        record(project, upstream, "-n", "2").assert_outcomes(passed=len(ADVERSARIAL))
    assert prompts(upstream.received) == ["hi", "bye"]
    workers: set[str] = set()
    seen = runs(project, workers)
    assert workers == {"gw0", "gw1"}
    assert len(recorders(seen)) == 1
    assert sorted(p for _c, a, p in seen if a == "replay") == sorted(ADVERSARIAL.values())
    assert len(streamtape.load(cassette_of(project, "test_matrix"))) == 2
    run(project, "-n", "2").assert_outcomes(passed=len(ADVERSARIAL))  # the upstream is gone


def test_a_case_that_waits_too_long_for_another_workers_recording_fails_naming_the_holder_and_its_matrix_at_once(
    project: pytest.Pytester, upstream: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = cassette_of(project, "test_matrix")
    path.parent.mkdir(parents=True)
    holder = subprocess.Popen(  # another worker, recording this matrix for ever
        [sys.executable, "-c", "import sys, time\nfrom streamtape.cassette.lock import cassette_lock\n"
         "with cassette_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)", str(path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(matrix_record, "WAIT_S", 0.2)
        waits: list[Path] = []

        def hold(cassette: Path, timeout: float, *, shared: bool = False) -> CassetteLock:
            waits.append(cassette)
            return real_hold(cassette, timeout, shared=shared)

        monkeypatch.setattr(matrix_record, "hold", hold)  # the real lock, its waits counted
        project.makepyfile(test_m=MATRIX)
        result = record(project, upstream, "-k", "utf8-split or bytes-1")
        result.assert_outcomes(errors=2, deselected=len(ADVERSARIAL) - 2)
        result.stdout.fnmatch_lines([
            f"streamtape: waiting for this profile matrix's recording: {path}: another writer (pid {holder.pid}) "
            f"has held it for more than 0.2 s ({lock_path(path)})",
        ])
        assert waits == [path]  # the second case fails at once, without waiting as long again
        assert upstream.received == []
    finally:
        holder.kill()
        holder.wait()


@needs_openai
def test_a_module_marked_adversarial_records_each_test_once_through_the_openai_sdk_and_replays_offline(
    project: pytest.Pytester, upstream: ScriptedServer
) -> None:
    """The issue's module: ``pytestmark`` asks for the adversarial set, no cassette exists yet."""
    project.makepyfile(
        test_m='''
import openai, pytest

pytestmark = pytest.mark.streamtape(profiles="adversarial")

def ask(client, prompt):
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": prompt}], stream=True)
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

def test_over_the_url(streamtape):
    client = openai.OpenAI(api_key="sk-x", base_url=streamtape.url + "/v1", max_retries=0)
    assert ask(client, "hi") == "Echo: hi ☃"

def test_in_process(streamtape):
    client = openai.OpenAI(api_key="sk-x", base_url="http://llm.test/v1", http_client=streamtape.client(),
                           max_retries=0)
    assert ask(client, "hello") == "Echo: hello ☃"
'''
    )
    record(project, upstream).assert_outcomes(passed=2 * len(ADVERSARIAL))
    assert sorted(prompts(upstream.received)) == ["hello", "hi"]
    upstream.__exit__()
    run(project).assert_outcomes(passed=2 * len(ADVERSARIAL))
    assert len(upstream.received) == 2
