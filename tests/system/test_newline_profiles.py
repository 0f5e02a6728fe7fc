"""``newline=`` over real sockets: an LF recording replayed with CRLF or CR line endings.

Vertex AI sends CRLF; llama.cpp and most OpenAI-compatible servers send LF. A client
that finds events by splitting on ``\\n\\n`` works on every LF recording and on none of
Vertex's streams: ``newline=crlf`` shows it from any recording. The naive splitter here is
that bug, written the way such clients write it; a conforming SSE parser (httpx-sse,
streamtape's own) reads the same events under every line ending and every chunking.

One ``streamtape serve`` process serves the module; each request names its profile in
``X-Streamtape-Profile``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import httpx
import httpx_sse
import pytest

import streamtape
from streamtape.shapes import SSEEvent, SSEParser
from tests.support.builders import CHAT_BODY, EVENTS, chat_ix
from tests.support.processes import STREAMTAPE, Child, start
from tests.support.servers import raw_request

LF_EVENTS = [e.decode().removesuffix("\n\n") for e in EVENTS]
"""The recording's events as a splitter on a blank line gets them: the LF recording's blocks."""
DATA = [e.removeprefix("data: ") for e in LF_EVENTS]
"""What an SSE parser reads from each event."""
EOL = {"lf": "\n", "crlf": "\r\n", "cr": "\r"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    """``streamtape serve`` on an LF chat recording (as llama.cpp and vLLM send it)."""
    tape = tmp_path_factory.mktemp("newline") / "chat.tape"
    streamtape.save(tape, [chat_ix(5)])
    with start([*STREAMTAPE, "serve", str(tape), "--port", "0", "--profile", "instant"],
               r"on http://(\S+?:\d+)") as child:
        yield child


def naive_split(server: Child, profile: str) -> tuple[list[str], str]:
    """A CRLF-naive client: it buffers the decoded stream and cuts an event off at every
    ``\\n\\n``. Returns the events it found and what was left in its buffer at the end."""
    events, buffer = [], ""
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=CHAT_BODY,
                      headers={"X-Streamtape-Profile": profile}) as r:
        for text in r.iter_text():
            buffer += text
            while "\n\n" in buffer:
                event, buffer = buffer.split("\n\n", 1)
                events.append(event)
    return events, buffer


def httpx_sse_data(server: Child, profile: str) -> list[str]:
    with httpx.Client() as client, httpx_sse.connect_sse(
        client, "POST", server.url + "/v1/chat/completions", json=CHAT_BODY,
        headers={"X-Streamtape-Profile": profile},
    ) as source:
        return [event.data for event in source.iter_sse()]


def streamtape_parser_data(server: Child, profile: str) -> list[str]:
    parser, out = SSEParser(), []
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=CHAT_BODY,
                      headers={"X-Streamtape-Profile": profile}) as r:
        for piece in r.iter_raw():
            out += [i.data for i in parser.feed(piece) if isinstance(i, SSEEvent)]
    return out


@pytest.mark.parametrize("profile", ["instant", "instant;newline=lf", "instant;newline=lf;chunk=bytes:1"])
def test_a_crlf_naive_splitter_reads_every_event_of_an_lf_recording(server, profile):
    assert naive_split(server, profile) == (LF_EVENTS, "")


@pytest.mark.parametrize("newline", ["crlf", "cr"])
def test_under_newline_crlf_or_cr_a_crlf_naive_splitter_finds_no_event_only_one_blob(server, newline):
    events, blob = naive_split(server, f"instant;newline={newline}")
    assert events == []  # the splitter's bug, exposed: it never sees "\n\n"
    eol = EOL[newline]
    assert blob == "".join(e + eol + eol for e in LF_EVENTS)


@pytest.mark.parametrize("newline", ["lf", "crlf", "cr"])
@pytest.mark.parametrize("chunk", ["recorded", "crlf-split", "bytes:1", "split-events"])
def test_a_conforming_sse_parser_reads_the_same_events_under_every_newline(server, newline, chunk):
    profile = f"instant;newline={newline};chunk={chunk}"
    assert httpx_sse_data(server, profile) == DATA
    assert streamtape_parser_data(server, profile) == DATA


def test_newline_crlf_gives_crlf_split_a_chunk_boundary_between_every_cr_and_its_lf(server):
    lf = raw_request(server.url, headers={"X-Streamtape-Profile": "instant;chunk=crlf-split"})
    assert [d for _, d in lf.chunks] == EVENTS  # an LF recording: nothing to cut
    r = raw_request(server.url, headers={"X-Streamtape-Profile": "instant;newline=crlf;chunk=crlf-split"})
    assert r.ending == "complete" and r.body == b"".join(EVENTS).replace(b"\n", b"\r\n")
    chunks = [d for _, d in r.chunks]
    assert len(chunks) == 3 * len(EVENTS)
    assert not any(b"\r\n" in c for c in chunks)
    for before, after in itertools.pairwise(chunks):
        assert before.endswith(b"\r") == after.startswith(b"\n")


@pytest.mark.parametrize("newline", ["crlf", "cr"])
def test_an_event_fault_cuts_at_an_event_boundary_of_the_converted_body(server, newline):
    r = raw_request(server.url, headers={"X-Streamtape-Profile": f"instant;newline={newline};fault=cut-event:3"})
    eol = EOL[newline].encode()
    assert r.ending == "eof"
    assert r.body == b"".join(EVENTS[:3]).replace(b"\n", eol)
