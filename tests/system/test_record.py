"""The recorder end to end: real mitmproxy (``streamtape record``), real upstream servers, real httpx."""

from __future__ import annotations

import gzip
import itertools
import json
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape import Cassette, CassetteError
from tests.support import ROOT
from tests.support.builders import chat_events, sse, wait_until
from tests.support.processes import STREAMTAPE, start
from tests.support.recording import recording
from tests.support.servers import (
    ScriptedServer,
    close_delimited,
    close_mid_stream,
    content_length,
    gzip_sse,
    ndjson_lines,
    refused_port,
    self_signed_tls,
    split_writes,
    sse_events,
)

pytestmark = pytest.mark.slow

TWENTY = [sse({"i": i, "text": f"token{i}"}) for i in range(20)]


def on_disk(path: Path) -> Cassette | None:
    """The cassette as far as the recorder has written it (None before its header is there)."""
    try:
        return streamtape.load(path)
    except CassetteError:
        return None


def stream_raw(url: str, method: str = "POST", **kw) -> tuple[int, list[bytes]]:
    """Read a response's raw (still encoded) body as the pieces the client got."""
    with httpx.Client(timeout=10) as c, c.stream(method, url, **kw) as r:
        return r.status_code, list(r.iter_raw())


def test_twenty_writes_30ms_apart_become_twenty_pieces_with_their_bytes_and_timing(tmp_path: Path) -> None:
    with ScriptedServer({"/v1/chat/completions": sse_events(TWENTY, gap=0.03)}) as up:
        _, direct = stream_raw(up.url + "/v1/chat/completions", json={"stream": True})
        out = tmp_path / "s.tape"
        with recording(out, upstream=up.url) as rec:
            status, proxied = stream_raw(rec.url + "/v1/chat/completions", json={"stream": True})
            rec.wait_lines(1)
    assert status == 200
    assert b"".join(proxied) == b"".join(direct) == b"".join(TWENTY)
    (ix,) = streamtape.load(out)
    assert ix.response is not None
    assert [c.data for c in ix.response.pieces] == TWENTY
    assert ix.outcome == "complete" and ix.error is None
    assert ix.response.framing == "chunked"
    assert ix.response.content_type == "text/event-stream"
    offsets = [c.at_ns for c in ix.pieces]
    assert offsets == sorted(offsets)
    gaps_ms = [(b - a) / 1e6 for a, b in itertools.pairwise(offsets)]
    # 30 ms apart on the upstream; a loaded 2-core machine may stretch single gaps.
    assert 25 <= statistics.median(gaps_ms) <= 60
    assert min(gaps_ms) >= 10
    total_ms = (offsets[-1] - offsets[0]) / 1e6
    assert 19 * 30 * 0.9 <= total_ms <= 19 * 30 + 1500
    assert 0 <= ix.response.headers_at_ns <= ix.pieces[0].at_ns
    assert ix.end_ns is not None and ix.end_ns >= offsets[-1]
    assert ix.request.method == "POST" and ix.request.url.endswith("/v1/chat/completions")
    assert json.loads(ix.request.body) == {"stream": True}


def test_gzip_body_is_recorded_as_received_and_still_decompresses(tmp_path: Path) -> None:
    events = chat_events(["Grüße", " aus", " Köln"])
    with ScriptedServer({"/g": gzip_sse(events, gap=0.01)}) as up:
        _, direct = stream_raw(up.url + "/g", "GET", headers={"Accept-Encoding": "gzip"})
        out = tmp_path / "g.tape"
        with recording(out, upstream=up.url) as rec:
            _, proxied = stream_raw(rec.url + "/g", "GET", headers={"Accept-Encoding": "gzip"})
            rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert ix.response is not None
    assert ix.response.header("content-encoding") == "gzip"
    # Byte for byte what the client got; the same stream as direct (gzip's
    # header carries a timestamp, so compare direct after decompressing).
    assert ix.response.body == b"".join(proxied)
    assert gzip.decompress(ix.response.body) == gzip.decompress(b"".join(direct)) == b"".join(events)
    assert len(ix.pieces) >= 2


def test_a_character_split_across_two_writes_stays_split(tmp_path: Path) -> None:
    euro = "€".encode()  # 3 bytes
    pieces = [b"data: {\"t\": \"5" + euro[:1], euro[1:] + b"\"}\n\n"]
    with ScriptedServer({"/s": split_writes(pieces, gap=0.05)}) as up:
        out = tmp_path / "u.tape"
        with recording(out, upstream=up.url) as rec:
            _, got = stream_raw(rec.url + "/s", "GET")
            rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert [c.data for c in ix.pieces] == pieces
    assert b"".join(got) == b"".join(pieces)
    with pytest.raises(UnicodeDecodeError):
        ix.pieces[0].data.decode("utf-8")


def test_ndjson_stream_is_recorded_line_by_line(tmp_path: Path) -> None:
    lines = [{"message": {"role": "assistant", "content": w}, "done": False} for w in ("Reykjav", "ik")]
    lines.append({"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"})
    with ScriptedServer({"/api/chat": ndjson_lines(lines, gap=0.01)}) as up:
        out = tmp_path / "n.tape"
        with recording(out, upstream=up.url) as rec:
            stream_raw(rec.url + "/api/chat", json={"model": "llama3.1", "messages": []})
            rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert ix.response is not None
    assert ix.response.content_type == "application/x-ndjson"
    assert [json.loads(c.data) for c in ix.pieces] == lines


def test_content_length_json_is_skipped_by_default_and_recorded_with_all(tmp_path: Path) -> None:
    body = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    sse_body = b"".join(TWENTY[:5])
    routes = {"/json": content_length(body), "/sse-cl": content_length(sse_body, writes=5, gap=0.02, ctype="text/event-stream")}
    with ScriptedServer(routes) as up:
        out = tmp_path / "d.tape"
        with recording(out, upstream=up.url) as rec:
            assert stream_raw(rec.url + "/json", "GET")[1] != []
            stream_raw(rec.url + "/sse-cl", "GET")
            rec.wait_lines(1)
        default = streamtape.load(out)
        out_all = tmp_path / "all.tape"
        with recording(out_all, "--all", upstream=up.url) as rec:
            _, got = stream_raw(rec.url + "/json", "GET")
            rec.wait_lines(1)
    # Default: only the SSE one (Content-Length framed, but text/event-stream).
    assert [ix.request.path for ix in default] == ["/sse-cl"]
    assert default[0].response is not None
    assert default[0].response.framing == "content-length"
    assert default[0].response.body == sse_body
    assert len(default[0].pieces) >= 2  # one piece per socket read
    (ix,) = streamtape.load(out_all)
    assert ix.response is not None
    assert ix.response.framing == "content-length" and ix.response.body == body == b"".join(got)


def test_close_delimited_body_is_recorded_complete(tmp_path: Path) -> None:
    pieces = TWENTY[:4]
    with ScriptedServer({"/c": close_delimited(pieces, gap=0.03)}) as up:
        out = tmp_path / "c.tape"
        with recording(out, upstream=up.url) as rec:
            _, got = stream_raw(rec.url + "/c", "GET")
            rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert ix.response is not None
    assert ix.response.framing == "close-delimited"
    assert ix.outcome == "complete"
    assert ix.response.body == b"".join(pieces) == b"".join(got)
    assert len(ix.pieces) == 4


def test_upstream_closing_mid_stream_is_recorded_with_its_pieces_and_outcome(tmp_path: Path) -> None:
    events = chat_events(["a", "b", "c", "d", "e"])
    with ScriptedServer({"/cut": close_mid_stream(events, after=3)}) as up:
        out = tmp_path / "cut.tape"
        with recording(out, upstream=up.url) as rec:
            with pytest.raises(httpx.RemoteProtocolError):
                stream_raw(rec.url + "/cut", "GET")
            lines = rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert ix.outcome == "upstream_closed"
    assert "incomplete chunked read" in (ix.error or "")
    assert [c.data for c in ix.pieces] == events[:3]
    assert "upstream_closed" in lines[0]


def test_client_disconnect_is_recorded_with_the_pieces_so_far(tmp_path: Path) -> None:
    with ScriptedServer({"/slow": sse_events(TWENTY, gap=0.05)}) as up:
        out = tmp_path / "cd.tape"
        with recording(out, upstream=up.url) as rec:
            with httpx.Client(timeout=10) as c, c.stream("GET", rec.url + "/slow") as r:
                it = r.iter_raw()
                got = [next(it), next(it), next(it)]
            # leaving the block closes the connection mid-stream
            rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert ix.outcome == "client_disconnected"
    assert ix.error and "client disconnected" in ix.error.lower()
    assert 3 <= len(ix.pieces) < 20
    assert b"".join(c.data for c in ix.pieces).startswith(b"".join(got))


def test_secrets_in_headers_query_and_cookies_never_reach_the_file(tmp_path: Path) -> None:
    def handler(req, c):
        c.head(200, [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked"), ("Set-Cookie", "session=cookie-secret-3")])
        c.chunk(sse({"ok": True}))
        c.end_chunks()

    with ScriptedServer({"/v1/chat/completions": handler}) as up:
        out = tmp_path / "r.tape"
        with recording(out, "--redact-field", "user_secret", upstream=up.url) as rec:
            stream_raw(
                rec.url + "/v1/chat/completions?key=query-secret-1&model=m",
                headers={"Authorization": "Bearer sk-auth-secret-2", "Cookie": "sid=cookie-secret-4", "X-Api-Key": "xkey-secret-5"},
                json={"messages": [], "meta": {"user_secret": "body-secret-6"}},
            )
            rec.wait_lines(1)
        # The upstream still got the real values: redaction is only for the file.
        assert ("Authorization", "Bearer sk-auth-secret-2") in up.received[0].headers
    raw = out.read_bytes()
    for secret in (b"query-secret-1", b"sk-auth-secret-2", b"cookie-secret-3", b"cookie-secret-4", b"xkey-secret-5", b"body-secret-6"):
        assert secret not in raw
    (ix,) = streamtape.load(out)
    assert ix.request.header("authorization") == "REDACTED"
    assert "key=REDACTED" in ix.request.url and "model=m" in ix.request.url
    assert ix.response is not None
    assert ix.response.header("set-cookie") == "REDACTED"
    assert json.loads(ix.request.body)["meta"]["user_secret"] == "REDACTED"


def test_no_redact_keeps_the_values_when_the_user_asks(tmp_path: Path) -> None:
    with ScriptedServer({"/s": sse_events(TWENTY[:1])}) as up:
        out = tmp_path / "k.tape"
        with recording(out, "--no-redact", upstream=up.url) as rec:
            stream_raw(rec.url + "/s?key=kept-1", "GET", headers={"Authorization": "Bearer kept-2"})
            rec.wait_lines(1)
    raw = out.read_bytes()
    assert b"kept-1" in raw and b"kept-2" in raw


def test_filter_expression_limits_what_is_recorded_and_labels_are_stored(tmp_path: Path) -> None:
    with ScriptedServer({"*": sse_events(TWENTY[:2])}) as up:
        out = tmp_path / "f.tape"
        with recording(out, "--filter", "~u /keep", "--label", "backend=vllm", "--label", "run=2", upstream=up.url) as rec:
            stream_raw(rec.url + "/drop", "GET")
            stream_raw(rec.url + "/keep", "GET")
            rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert ix.request.path == "/keep"
    assert ix.labels == {"backend": "vllm", "run": "2"}


def test_refused_upstream_gives_the_client_a_502_and_the_recorder_keeps_running(tmp_path: Path) -> None:
    out = tmp_path / "x.tape"
    with refused_port() as port, ScriptedServer({"/ok": sse_events(TWENTY[:2])}) as up, \
            recording(out, upstream=f"http://127.0.0.1:{port}") as rec:
        r = httpx.get(rec.url + "/v1/models", timeout=10)
        assert r.status_code == 502
        assert r.text.strip()  # a readable body, not an empty one
        lines = rec.wait_lines(1)
        assert "502" in lines[0] or "upstream" in lines[0]
        assert "upstream unreachable" in lines[0]
        assert rec.proc.poll() is None
        del up
    assert rec.proc.returncode == 0
    (ix,) = streamtape.load(out)
    assert ix.outcome == "upstream_error"
    assert ix.error


def test_an_upstream_given_as_host_and_port_is_plain_http_as_for_a_shadow(tmp_path: Path) -> None:
    with ScriptedServer({"/s": sse_events(TWENTY[:2])}) as up, \
            recording(tmp_path / "h.tape", upstream=up.url.removeprefix("http://")) as rec:
        assert stream_raw(rec.url + "/s", "GET")[0] == 200
        rec.wait_lines(1)
    (ix,) = streamtape.load(tmp_path / "h.tape")
    assert ix.outcome == "complete" and ix.request.url == up.url + "/s"


def test_an_upstream_certificate_that_fails_verification_is_labelled_so_with_the_insecure_hint(tmp_path: Path) -> None:
    out = tmp_path / "tls.tape"
    with ScriptedServer({"/v1/chat/completions": sse_events(TWENTY[:2])}, tls=self_signed_tls()) as up, \
            recording(out, upstream=up.url) as rec:  # no --insecure: the self-signed certificate is refused
        r = httpx.post(rec.url + "/v1/chat/completions", json={"stream": True}, timeout=10)
        assert r.status_code == 502
        (line,) = rec.wait_lines(1)
        assert "upstream unreachable" not in line
        assert "[upstream TLS certificate not trusted: the client got a 502; --insecure records" in line
    (ix,) = streamtape.load(out)
    assert ix.outcome == "upstream_error" and ix.error and "certificate" in ix.error.lower()


def test_sigterm_stops_cleanly_and_saves_the_stream_in_flight(tmp_path: Path) -> None:
    with ScriptedServer({"/s": sse_events(TWENTY, gap=0.1), "/quick": sse_events(TWENTY[:3])}) as up:
        out = tmp_path / "t.tape"
        with recording(out, upstream=up.url) as rec:
            stream_raw(rec.url + "/quick", "GET")
            rec.wait_lines(1)
            with httpx.Client(timeout=10) as c, c.stream("GET", rec.url + "/s") as r:
                it = r.iter_raw()
                next(it), next(it), next(it)
                rc = rec.stop(signal.SIGTERM)
    assert rc == 0
    assert "Traceback" not in rec.stderr and "Error" not in rec.stderr
    quick, slow = streamtape.load(out)
    assert quick.outcome == "complete"
    assert slow.outcome == "interrupted"
    assert len(slow.pieces) >= 3
    assert "2 interactions saved" in rec.stderr


def test_sigkill_leaves_every_finished_interaction_readable_and_marks_the_unfinished(tmp_path: Path) -> None:
    with ScriptedServer({"/s": sse_events(TWENTY, gap=0.1), "/quick": sse_events(TWENTY[:5])}) as up:
        out = tmp_path / "k.tape"
        with recording(out, upstream=up.url) as rec:
            for _ in range(3):
                stream_raw(rec.url + "/quick", "GET")
            rec.wait_lines(3)
            with httpx.Client(timeout=10) as c, c.stream("GET", rec.url + "/s") as r:
                it = r.iter_raw()
                for _ in range(4):
                    next(it)

                def four_pieces_in() -> bool:
                    # Pieces reach the disk up to 1 s after they arrive (the writer batches them).
                    cas = on_disk(out)
                    return cas is not None and len(cas) == 4 and len(cas[3].pieces) >= 4

                wait_until(four_pieces_in)
                rec.proc.kill()
                rec.proc.wait()
    cas = streamtape.load(out)
    assert [ix.outcome for ix in cas] == ["complete"] * 3 + ["interrupted"]
    assert all([c.data for c in ix.pieces] == TWENTY[:5] for ix in cas[:3])
    assert 4 <= len(cas[3].pieces) < 20


def test_a_head_whose_first_piece_is_slow_reaches_the_file_before_any_piece(tmp_path: Path) -> None:
    # The head's work waits for the first piece (so that piece is stamped first), but not
    # for long: a recorder killed while the upstream thinks keeps the response's head.
    from tests.support.servers import SSE_HEADERS, Conn, Received

    def thinking(req: Received, c: Conn) -> None:
        c.head(200, SSE_HEADERS)
        time.sleep(30)

    with ScriptedServer({"/think": thinking}) as up:
        out = tmp_path / "h.tape"
        with recording(out, upstream=up.url) as rec, httpx.Client(timeout=10) as c, \
                c.stream("GET", rec.url + "/think") as r:
            assert r.status_code == 200

            def head_in() -> bool:
                cas = on_disk(out)
                return cas is not None and len(cas) == 1 and cas[0].response is not None

            wait_until(head_in, timeout=20)
            rec.proc.kill()
            rec.proc.wait()
    (ix,) = streamtape.load(out)
    assert ix.outcome == "interrupted"
    assert ix.response is not None and ix.response.status == 200
    assert ix.response.content_type == "text/event-stream"
    assert ix.pieces == ()


def test_mitmdump_with_the_addon_script_records(tmp_path: Path) -> None:
    mitmdump = Path(sys.executable).parent / "mitmdump"
    addon = ROOT / "addons" / "record.py"
    out = tmp_path / "m.tape"
    with (
        ScriptedServer({"/s": sse_events(TWENTY[:6], gap=0.01)}) as up,
        start([str(mitmdump), "-s", str(addon), "--mode", f"reverse:{up.url}", "--listen-host", "127.0.0.1",
               "-p", "0", "--set", f"streamtape_out={out}", "--set", "streamtape_label=via=mitmdump"],
              r"listening at (\S+?:\d+)", cwd=tmp_path) as proxy,
    ):
        _, got = stream_raw(proxy.url + "/s", "GET")
        wait_until(lambda: (cas := on_disk(out)) is not None and len(cas) == 1 and cas[0].outcome == "complete")
    (ix,) = streamtape.load(out)
    assert [c.data for c in ix.pieces] == TWENTY[:6] == got
    assert ix.labels == {"via": "mitmdump"}


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("streamtape_redact=maybe", "streamtape_redact: invalid value 'maybe'"),
        ("streamtape_label=novalue", "bad label 'novalue'"),
        ("streamtape_filter=~q ~~", "invalid filter expression"),
        ("streamtape_out=/nonexistent-dir/x.tape", "does not exist"),
    ],
)
def test_mitmdump_stops_loudly_on_a_bad_option(setting: str, message: str, tmp_path: Path) -> None:
    mitmdump = Path(sys.executable).parent / "mitmdump"
    addon = ROOT / "addons" / "record.py"
    p = subprocess.run(
        [str(mitmdump), "-q", "-s", str(addon), "--listen-host", "127.0.0.1", "-p", "0", "--set", setting],
        capture_output=True, text=True, timeout=30, cwd=tmp_path,
    )
    assert p.returncode != 0
    assert message in p.stdout + p.stderr


def test_proxy_mode_records_a_plain_http_app(tmp_path: Path) -> None:
    with ScriptedServer({"/s": sse_events(TWENTY[:3])}) as up:
        out = tmp_path / "p.tape"
        with recording(out, "--mode", "regular") as rec:
            with httpx.Client(proxy=rec.url, timeout=10) as c, c.stream("GET", up.url + "/s") as r:
                got = list(r.iter_raw())
            rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert ix.request.url == up.url + "/s"
    assert [c.data for c in ix.pieces] == TWENTY[:3] == got


def test_regular_mode_records_https_through_mitmproxys_ca(tmp_path: Path) -> None:
    confdir = tmp_path / "mitm"
    with ScriptedServer({"/v1/chat/completions": sse_events(TWENTY[:4], gap=0.01)}, tls=self_signed_tls()) as up:
        out = tmp_path / "tls.tape"
        # --insecure: the test upstream's certificate is self-signed.
        with recording(out, "--mode", "regular", "--confdir", str(confdir), "--insecure") as rec:
            ca = confdir / "mitmproxy-ca-cert.pem"  # what the README tells apps to trust
            with httpx.Client(proxy=rec.url, verify=ssl.create_default_context(cafile=str(ca)), timeout=10) as c, c.stream(
                "POST", up.url + "/v1/chat/completions", json={"stream": True}, headers={"Authorization": "Bearer tls-secret"}
            ) as r:
                got = list(r.iter_raw())
            rec.wait_lines(1)
    (ix,) = streamtape.load(out)
    assert ix.request.url == up.url + "/v1/chat/completions" and ix.request.url.startswith("https://")
    assert [c.data for c in ix.pieces] == TWENTY[:4] == got
    assert b"tls-secret" not in out.read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["record", "--listen", "127.0.0.1:notaport", "--upstream", "http://x"], "--listen"),
        (["record", "--listen", "127.0.0.1:0"], "--upstream URL is required"),
        (["record", "--listen", "127.0.0.1:0", "--upstream", "ftp://x"], "--upstream 'ftp://x'"),
        # mitmproxy's reverse mode takes no path: it stopped with a traceback on one.
        (["record", "--listen", "127.0.0.1:0", "--upstream", "http://x/v1"], "--upstream 'http://x/v1': takes no path"),
        (["record", "--listen", "127.0.0.1:0", "--upstream", "http://x/?k=1", "--shadow", "http://y"],
         "--upstream 'http://x/?k=1': takes no query or fragment"),
        (["record", "--listen", "127.0.0.1:0", "--upstream", "http://x", "--shadow", "http://y:z"],
         "--shadow 'http://y:z': bad port"),
        (["record", "--listen", "127.0.0.1:0", "--upstream", "http://x", "--label", "nokey"], "bad label"),
        (["record", "--mode", "sideways"], "Invalid value for '--mode'"),
        (["record", "--listen", "127.0.0.1:0", "--upstream", "http://x", "-o", "/nonexistent-dir/a.tape"], "does not exist"),
    ],
)
def test_record_bad_options_give_one_line_and_exit_2(args: list[str], message: str) -> None:
    p = subprocess.run([*STREAMTAPE, *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr


def test_record_on_a_busy_port_fails_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run(
            [*STREAMTAPE, "record", "--listen", f"127.0.0.1:{port}", "--upstream", "http://127.0.0.1:1", "-o", str(tmp_path / "b.tape")],
            capture_output=True, text=True, timeout=30,
        )
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("streamtape: error: cannot start the proxy") and "address already in use" in line
    assert not (tmp_path / "b.tape").exists()  # nothing was recorded, so no cassette
