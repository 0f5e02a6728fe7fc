"""Replay through a proxy: ``streamtape serve --proxy`` and ``mitmdump -s addons/replay.py``.

Real mitmproxy processes, real clients configured with an HTTP(S) proxy, a real
upstream (tests/support/servers.py) for requests no recording answers.
"""

from __future__ import annotations

import itertools
import re
import signal
import ssl
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape.errors import OptionError
from streamtape.mitm.options import parse_bool
from tests.support import ROOT
from tests.support.builders import CHAT_BODY, EVENTS, MS, WORDS, chat_ix
from tests.support.processes import STREAMTAPE, Child, start
from tests.support.servers import ScriptedServer, content_length, raw_request, refused_port

BIN = Path(sys.executable).parent
TEXT = "".join(e.decode() for e in EVENTS)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tape(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("tapes") / "chat.tape"
    streamtape.save(p, [chat_ix(20)])
    return p


@pytest.fixture(scope="module")
def confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mitm")


def _start_serve(tape: Path, confdir: Path, *extra: str) -> Child:
    """``streamtape serve --proxy --port 0`` running; its ``url`` is the proxy URL it reports."""
    return start(
        [*STREAMTAPE, "serve", "--proxy", "--port", "0", "--confdir", str(confdir), *extra, str(tape)],
        r"replay proxy on (\S+?:\d+)",
    )


def _stop(proc: Child) -> tuple[str, str]:
    proc.stop(signal.SIGINT, timeout=15)
    return proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def proxy(tape: Path, confdir: Path) -> Iterator[tuple[str, Child]]:
    proc = _start_serve(tape, confdir)
    yield proc.url, proc
    _, err = _stop(proc)
    assert "Traceback" not in err, err


def test_matching_request_is_replayed_one_http_chunk_per_recorded_piece(proxy: tuple[str, object]) -> None:
    url, _ = proxy
    r = raw_request(url, proxy=True, headers={"X-Streamtape-Profile": "instant"})
    assert r.status == 200
    assert [d for _, d in r.chunks] == EVENTS
    assert r.ending == "complete"


@pytest.mark.realtime
def test_proxy_replay_keeps_the_recorded_timing(proxy: tuple[str, object]) -> None:
    url, _ = proxy
    r = raw_request(url, proxy=True)
    arrivals = [t for t, _ in r.chunks]
    assert len(arrivals) == len(EVENTS)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    # Generous for a loaded machine (a second suite beside this one gave a median of 3.8 ms):
    # replay that lost the timing would be off by the whole 20 ms of every gap.
    assert statistics.median(abs(g - 20 * MS) for g in gaps) < 8 * MS, gaps


def test_https_through_the_proxy_with_its_ca(proxy: tuple[str, object], confdir: Path) -> None:
    url, _ = proxy
    ca = confdir / "mitmproxy-ca-cert.pem"
    with httpx.Client(proxy=url, verify=ssl.create_default_context(cafile=str(ca))) as client:
        r = client.post("https://api.openai.com/v1/chat/completions", json=CHAT_BODY,
                        headers={"X-Streamtape-Profile": "instant"})
    assert r.status_code == 200
    assert r.text == TEXT


@pytest.mark.httpx2
def test_openai_sdk_through_the_proxy(proxy: tuple[str, object]) -> None:
    import openai

    url, _ = proxy
    client = openai.OpenAI(
        base_url="http://api.openai.com/v1", api_key="sk-test", max_retries=0,
        http_client=openai.DefaultHttpxClient(proxy=url),
    )
    stream = client.chat.completions.create(
        model="test-model", stream=True, messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Streamtape-Profile": "adversarial:split-events"},
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "".join(WORDS)


def test_cut_fault_reaches_the_client_through_the_proxy(proxy: tuple[str, object]) -> None:
    url, _ = proxy
    with pytest.raises(httpx.RemoteProtocolError), httpx.Client(proxy=url) as client:
        client.post("http://api.openai.com/v1/chat/completions", json=CHAT_BODY,
                    headers={"X-Streamtape-Profile": "instant;fault=cut:50%"})


def test_unmatched_request_goes_upstream(proxy: tuple[str, object]) -> None:
    url, _ = proxy
    with ScriptedServer({"/v1/models": content_length(b'{"data": []}')}) as up, \
            httpx.Client(proxy=url) as client:
        r = client.get(up.url + "/v1/models")
    assert r.status_code == 200
    assert r.json() == {"data": []}
    assert [x.path for x in up.received] == ["/v1/models"]


def test_refuse_unmatched_answers_the_no_match_status_naming_the_closest(tape: Path, confdir: Path) -> None:
    proc = _start_serve(tape, confdir, "--refuse-unmatched", "--no-match-status", "501")
    try:
        with ScriptedServer({"*": content_length(b"{}")}) as up, httpx.Client(proxy=proc.url) as client:
            r = client.post(up.url + "/v1/chat/completions", json={**CHAT_BODY, "model": "x"})
            assert r.status_code == 501 and r.headers["x-should-retry"] == "false"
            err = r.json()["error"]
            assert err["type"] == "streamtape_no_match" and re.search(r"closest is \S+\.tape#0", err["message"])
            assert up.received == []
    finally:
        out, err_text = _stop(proc)
    assert "refused (501)" in out
    assert "refused 1" in err_text


def test_mitmdump_script_replays_from_the_cassette(tape: Path, confdir: Path) -> None:
    with start(
        [str(BIN / "mitmdump"), "--listen-host", "127.0.0.1", "--listen-port", "0",
         "--set", f"confdir={confdir}", "-s", str(ROOT / "addons" / "replay.py"),
         "--set", f"streamtape_cassette={tape}", "--set", "streamtape_profile=instant",
         "--set", "streamtape_unmatched=refuse"],
        r"listening at (\S+?:\d+)",
    ) as mitmdump:
        r = raw_request(mitmdump.url, proxy=True, timeout=5)
        assert [d for _, d in r.chunks] == EVENTS
        with httpx.Client(proxy=mitmdump.url) as client:
            assert client.get("http://llm.test/other").status_code == 422
    out = mitmdump.stdout + mitmdump.stderr
    assert "interaction 0 of chat.tape" in out
    assert "Traceback" not in out


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, True), ("", True), ("TRUE", True), (" yes ", True), ("on", True), ("1", True),
     ("false", False), ("No", False), ("off", False), ("0", False)],
)
def test_both_addons_read_a_boolean_option_by_mitmproxys_rule(value: str | None, expected: bool) -> None:
    # --set name (None) and --set name= ("") mean true, as for mitmproxy's own booleans.
    assert parse_bool("streamtape_strict", value) is expected


def test_a_boolean_option_that_is_neither_names_the_option_and_the_value() -> None:
    with pytest.raises(OptionError, match=r"^streamtape_all: invalid value 'maybe' \(expected true or false\)$"):
        parse_bool("streamtape_all", "maybe")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("streamtape_profile=chunk=sideways", "sideways"),
        ("streamtape_unmatched=maybe", "expected passthrough or refuse"),
        ("streamtape_strict=perhaps", "expected true or false"),
        ("streamtape_cassette=/nonexistent/x.tape", "no such cassette file"),
    ],
)
def test_mitmdump_stops_loudly_on_a_bad_option(tape: Path, option: str, message: str) -> None:
    res = subprocess.run(
        [str(BIN / "mitmdump"), "-q", "--listen-host", "127.0.0.1", "--listen-port", "0",
         "-s", str(ROOT / "addons" / "replay.py"), "--set", f"streamtape_cassette={tape}",
         "--set", option],
        capture_output=True, text=True, timeout=30, cwd=ROOT,
    )
    assert res.returncode != 0
    assert message in res.stdout + res.stderr


def test_serve_proxy_bad_profile_is_one_line(tape: Path) -> None:
    res = subprocess.run(
        [*STREAMTAPE, "serve", "--proxy", "--port", "0",
         "--profile", "latency=warp", str(tape)],
        capture_output=True, text=True, timeout=30, cwd=ROOT,
    )
    assert res.returncode == 2
    assert res.stderr.startswith("streamtape: error: ") and "warp" in res.stderr


def test_a_request_passed_to_an_upstream_that_refuses_gets_a_json_502_naming_it(proxy: tuple[str, Child]) -> None:
    # Nothing recorded answers it, so it goes upstream, and nothing listens there: the
    # client reads why in its API's error shape, not mitmproxy's HTML page.
    url, proc = proxy
    with refused_port() as port, httpx.Client(proxy=url, timeout=10) as c:
        r = c.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "unrecorded"})
    assert r.status_code == 502
    assert r.headers["content-type"].startswith("application/json")
    message = r.json()["error"]["message"]
    assert message.startswith(f"streamtape's replay proxy could not reach the upstream http://127.0.0.1:{port}: "
                              "connection refused"), message
    assert "passed upstream" in proc.wait_for(rf"127\.0\.0\.1:{port}/v1/chat/completions passed upstream").group(0)
