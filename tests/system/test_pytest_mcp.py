"""The pytest plugin records an agent's MCP session once and replays it offline (pytester).

The MCP server is an upstream like any other: the test module below runs the
``mcp`` package's client against ``streamtape.url`` (and in-process, through
``streamtape.async_transport()`` in an httpx client); recorded once in front of
the real FastMCP server, then replayed with the server gone, faithfully and
under every adversarial profile. This is the example of docs/guide/agents.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import streamtape
from streamtape.mcp import sessions_of
from tests.support import ROOT
from tests.support.processes import start
from tests.support.pytester_runs import (  # imports mitmproxy once, before any run
    PLUGINS,
    asyncio_project,
)

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.slow

AGENT_MODULE = '''
import asyncio

from tests.support.mcp_client import mcp_http_client, session


def test_agent_over_the_url(streamtape):
    seen = asyncio.run(session(streamtape.url + "/mcp"))
    assert seen.result == "counted to 3"
    assert [p for p, _, _ in seen.progress] == [1.0, 2.0, 3.0]
    assert seen.resource == "buy milk; café at 5€"


def test_agent_in_process(streamtape):
    async def main():
        async with mcp_http_client(streamtape.async_transport()) as client:
            return await session("http://mcp.test/mcp", http_client=client)

    seen = asyncio.run(main())
    assert seen.tools == ("count", "add") and seen.result == "counted to 3"
'''


def test_an_mcp_session_recorded_once_replays_offline_under_every_adversarial_profile(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamtape.profiles import ADVERSARIAL

    monkeypatch.syspath_prepend(str(ROOT))  # the generated module imports tests.support
    asyncio_project(pytester)
    pytester.makepyfile(test_agent=AGENT_MODULE)
    with start([sys.executable, "-m", "tests.support.mcp_server"], r"mcp server on (http://\S+?)/mcp") as server:
        recorded = pytester.runpytest(*PLUGINS, "--streamtape-record-mode=once",
                                      "--streamtape-upstream", server.address)
    recorded.assert_outcomes(passed=2)
    tape = Path(pytester.path / "cassettes" / "test_agent" / "test_agent_over_the_url.tape")
    [mcp] = sessions_of(streamtape.load(tape))
    assert [c.kind for c in mcp.calls].count("end") == 1  # the DELETE is recorded: the replay answers it
    assert len(mcp.requests) == 4

    offline = pytester.runpytest(*PLUGINS)  # the server is gone
    offline.assert_outcomes(passed=2)
    matrix = pytester.runpytest(*PLUGINS, "--streamtape-profile", "adversarial:*", "-v")
    matrix.assert_outcomes(passed=2 * len(ADVERSARIAL))
    matrix.stdout.fnmatch_lines(["*test_agent_over_the_url[[]bytes-1[]] PASSED*"])
