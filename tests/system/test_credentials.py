"""``streamtape record`` in front of a scripted upstream warns once per request body field that
looks like a credential, naming the option that redacts it. Finding the credentials and the
recorder's reports are tests/unit/test_credentials.py."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import streamtape
from streamtape.cassette.model import REDACTED
from tests.support.builders import chat_events
from tests.support.recording import recording
from tests.support.servers import ScriptedServer, sse_events

SK = "sk-proj-" + "aB3dE5fG7hJ9kL1mN3pQ5r"


@pytest.mark.slow
def test_record_warns_once_per_field_naming_the_redact_field_option(tmp_path: Path) -> None:
    events = chat_events(["ok"])
    doc = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}], "user": {"api_key": SK}}
    with ScriptedServer({"/v1/chat/completions": sse_events(events)}) as up:
        out = tmp_path / "c.tape"
        with recording(out, upstream=up.url) as rec:
            for _ in range(2):
                httpx.post(rec.url + "/v1/chat/completions", json=doc, timeout=10)
            rec.wait_lines(2)
            rec.stop()
        warnings = [ln for ln in rec.stderr.splitlines() if "credential" in ln]
        assert warnings == [
            "streamtape: warning: request body field user.api_key looks like a credential "
            "(a secret key (sk-...)) and is recorded as is; --redact-field api_key redacts it"
        ]
        assert SK.encode() in out.read_bytes()  # the warning told the truth

        out2 = tmp_path / "r.tape"
        with recording(out2, "--redact-field", "api_key", upstream=up.url) as rec:
            httpx.post(rec.url + "/v1/chat/completions", json=doc, timeout=10)
            rec.wait_lines(1)
            rec.stop()
        assert "credential" not in rec.stderr
        assert SK.encode() not in out2.read_bytes()
        (ix,) = streamtape.load(out2)
        assert json.loads(ix.request.body)["user"]["api_key"] == REDACTED
