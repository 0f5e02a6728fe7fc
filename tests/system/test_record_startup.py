"""Nothing passes unrecorded while the recorder starts, and it says where it listens once.

mitmproxy listens before it calls the addons' ``running`` hooks, and the
recording addon opens its cassette in its ``running`` hook. An addon ahead of
it in the chain holds the startup open (its own ``running`` hook waits) until
a real client's request has reached the proxy: that request arrives exactly in
the window, every time, instead of twice in 25 starts.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import httpx
import pytest
from mitmproxy import ctx, http
from mitmproxy.master import Master

import streamtape
from streamtape.cassette.model import Interaction
from streamtape.mitm.proxy import run_proxy
from streamtape.mitm.record import RecordAddon
from tests.support.builders import chat_events
from tests.support.processes import STREAMTAPE, start
from tests.support.servers import ScriptedServer, sse_events

pytestmark = pytest.mark.slow

EVENTS = chat_events(["early", " bird"])
PATH = "/v1/chat/completions"


class RequestDuringStartup:
    """Sends one request to the proxy from its ``running`` hook and returns once the proxy has it."""

    def __init__(self) -> None:
        self.master: Master | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.arrived: asyncio.Event | None = None
        self.response: httpx.Response | None = None
        self.answered = threading.Event()
        self.recorder_ready_on_arrival: bool | None = None

    async def running(self) -> None:
        self.master = ctx.master
        self.loop = asyncio.get_running_loop()
        self.arrived = asyncio.Event()
        host, port = ctx.master.addons.get("proxyserver").listen_addrs()[0][:2]
        threading.Thread(target=self._send, args=(f"http://{host}:{port}",), daemon=True).start()
        await asyncio.wait_for(self.arrived.wait(), 10)

    def request(self, flow: http.HTTPFlow) -> None:
        record = ctx.master.addons.get("recordaddon")
        self.recorder_ready_on_arrival = record is not None and record.recorder is not None
        if self.arrived is not None:
            self.arrived.set()

    def _send(self, url: str) -> None:
        try:
            self.response = httpx.post(url + PATH, json={"stream": True}, timeout=10)
        finally:
            self.answered.set()


def test_a_request_that_arrives_before_the_recorder_runs_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "early.tape"
    early = RequestDuringStartup()
    finished: list[Interaction] = []
    errors: list[BaseException] = []
    with ScriptedServer({PATH: sse_events(EVENTS)}) as up:
        addon = RecordAddon(on_finished=finished.append)

        def run() -> None:
            try:
                asyncio.run(run_proxy(f"reverse:{up.url}", "127.0.0.1", 0, [early, addon],
                                      options={"streamtape_out": str(out)}))
            except BaseException as e:  # surfaced below, in the test's thread
                errors.append(e)

        proxy = threading.Thread(target=run, daemon=True)
        proxy.start()
        assert early.answered.wait(20), "the client got no answer"
        assert early.loop is not None and early.master is not None
        early.loop.call_soon_threadsafe(early.master.shutdown)
        proxy.join(20)
    assert not errors and not proxy.is_alive()
    assert early.recorder_ready_on_arrival is False  # it did come in the window
    assert early.response is not None and early.response.status_code == 200
    assert early.response.content == b"".join(EVENTS)
    (ix,) = streamtape.load(out)
    assert ix.request.path == PATH
    assert [p.data for p in ix.pieces] == EVENTS
    assert finished == [ix]


def test_recording_line_names_the_listen_address_once_in_reverse_mode_to_https(tmp_path: Path) -> None:
    # mitmproxy listens on TCP and UDP (HTTP/3) for an https:// upstream and lists both.
    cmd = [*STREAMTAPE, "record", "--listen", "127.0.0.1:0", "-o", str(tmp_path / "r.tape"),
           "--upstream", "https://127.0.0.1:9", "--insecure"]
    with start(cmd, r"recording on (.+?) -> https://") as proc:
        assert proc.url.count(":") == 2 and "," not in proc.url, proc.url  # http://HOST:PORT, nothing more
        proc.stop(signal.SIGTERM)
