"""Recordings made by the real tools, for the import and export tests.

One scripted upstream (tests/support/servers.py) streams an OpenAI chat answer with
raw UTF-8 in it, a gzip-encoded copy of it, and a route whose answer changes
on every call (repeated requests). Then:

- :func:`vcr_httpx` / :func:`vcr_requests`: vcrpy records an httpx (via
  httpx-sse) or requests streaming call, in its YAML or JSON serializer;
- :func:`pytest_recording`: pytest-recording records a test that makes the
  call, laying cassettes out as it does (``cassettes/<module>/<test>.yaml``);
- :func:`mitmdump`: ``mitmdump -w`` in reverse mode, with mitmproxy's own HAR
  export (``--set hardump=``), captures the same calls.

Each returns what the client got (the assembled answer text), so a test can
compare an import with it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx_sse
import requests
import vcr

from tests.support.builders import chat_events
from tests.support.processes import start
from tests.support.servers import Conn, Received, ScriptedServer, gzip_sse, sse_events

WORDS = ["Hel", "lo", ", wör", "ld", " 日本", "!"]
"""Raw UTF-8 in the JSON, as llama.cpp and vLLM send it."""
TEXT = "".join(WORDS)
EVENTS = chat_events(WORDS)
CHAT = "/v1/chat/completions"
GZIP = "/v1/gzip/chat/completions"
COUNTER = "/v1/counter/chat/completions"
BODY: dict[str, Any] = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def counter_answer(n: int) -> str:
    return f"answer {n}"


def _counting() -> object:
    calls = [0]

    def handle(req: Received, c: Conn) -> None:
        calls[0] += 1
        sse_events(chat_events([counter_answer(calls[0])]))(req, c)

    return handle


@contextmanager
def upstream(gap: float = 0.01) -> Iterator[ScriptedServer]:
    """The scripted server: chat stream, its gzip copy, and the counter."""
    routes = {CHAT: sse_events(EVENTS, gap), GZIP: gzip_sse(EVENTS, gap), COUNTER: _counting()}
    with ScriptedServer(routes) as up:  # type: ignore[arg-type]
        yield up


def sse_text(lines: Iterable[str | bytes]) -> str:
    """The answer an OpenAI chat stream assembles to (the client's view, parsed here, not by streamtape);
    ``lines`` as a client iterates them (requests' ``iter_lines`` may give bytes)."""
    out = []
    for raw in lines:
        line = raw if isinstance(raw, str) else raw.decode()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        for choice in json.loads(data)["choices"]:
            out.append(choice["delta"].get("content") or "")
    return "".join(out)


def httpx_call(client: httpx.Client, url: str) -> str:
    with httpx_sse.connect_sse(client, "POST", url, json=BODY) as source:
        return sse_text(f"data: {sse.data}" for sse in source.iter_sse())


def requests_call(session: requests.Session, url: str) -> str:
    with session.post(url, json=BODY, stream=True) as r:
        r.encoding = "utf-8"  # SSE is UTF-8; requests would guess ISO-8859-1 for text/*
        return sse_text(r.iter_lines(decode_unicode=True))


@dataclass
class Captured:
    path: Path
    texts: list[str]
    """What the client got, one per call, in call order."""


def vcr_httpx(path: Path, base: str, *, serializer: str = "yaml") -> Captured:
    """vcrpy records three httpx calls: the chat stream, its gzip copy, the counter twice."""
    with vcr.use_cassette(str(path), serializer=serializer, record_mode="all"), httpx.Client() as c:
        texts = [httpx_call(c, base + CHAT), httpx_call(c, base + GZIP)]
        texts += [httpx_call(c, base + COUNTER), httpx_call(c, base + COUNTER)]
    return Captured(path, texts)


def vcr_requests(path: Path, base: str, *, serializer: str = "yaml") -> Captured:
    """vcrpy records the same calls made with requests."""
    with vcr.use_cassette(str(path), serializer=serializer, record_mode="all"), requests.Session() as s:
        texts = [requests_call(s, base + CHAT), requests_call(s, base + GZIP)]
        texts += [requests_call(s, base + COUNTER), requests_call(s, base + COUNTER)]
    return Captured(path, texts)


PYTEST_RECORDING_TEST = '''
import httpx, httpx_sse, pytest, requests

BODY = {body!r}

def text(lines):
    import json
    out = []
    for line in lines:
        if line.startswith("data:") and line[5:].strip() != "[DONE]":
            out += [c["delta"].get("content") or "" for c in json.loads(line[5:])["choices"]]
    return "".join(out)

@pytest.mark.vcr
def test_httpx_stream():
    with httpx.Client() as c, httpx_sse.connect_sse(c, "POST", {url!r}, json=BODY) as src:
        print("TEXT", text(f"data: {{e.data}}" for e in src.iter_sse()))

@pytest.mark.vcr
def test_requests_gzip_stream():
    with requests.post({gz_url!r}, json=BODY, stream=True) as r:
        r.encoding = "utf-8"
        print("TEXT", text(r.iter_lines(decode_unicode=True)))
'''


def pytest_recording(folder: Path, base: str) -> tuple[Path, list[str]]:
    """Run pytest with pytest-recording on a test file that streams twice; returns the
    cassette folder it wrote and what each test's client got."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_streams.py").write_text(
        textwrap.dedent(PYTEST_RECORDING_TEST.format(body=BODY, url=base + CHAT, gz_url=base + GZIP))
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--record-mode=once",
         "test_streams.py"],
        cwd=folder, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    texts = [line.split("TEXT ", 1)[1] for line in run.stdout.splitlines() if "TEXT " in line]
    return folder / "cassettes", texts


def mitmdump(out: Path, base: str, *extra: str) -> Captured:
    """``mitmdump -w OUT --set hardump=OUT.har`` in reverse mode in front of ``base``, while
    httpx makes the chat and gzip calls through it; stopped with SIGINT (which writes the HAR)."""
    cmd = [
        str(Path(sys.executable).with_name("mitmdump")), "--listen-host", "127.0.0.1", "-p", "0",
        "--mode", f"reverse:{base}", "-w", str(out), "--set", f"hardump={out.with_suffix('.har')}", *extra,
    ]
    with start(cmd, r"listening at (\S+:\d+)") as proxy, httpx.Client() as c:
        texts = [httpx_call(c, proxy.url + CHAT), httpx_call(c, proxy.url + GZIP)]
        proxy.stop(signal.SIGINT, timeout=30)
    return Captured(out, texts)
