"""Piece boundaries reach a Node ``fetch`` (undici) client's reads through ``streamtape serve``.

A client that decodes each read of a ``fetch`` body with a fresh ``TextDecoder``
(``new TextDecoder().decode(value)``, no ``{stream: true}``) turns a character
split across two reads into two U+FFFD. ``chunk=utf8-split`` exists to show
that bug, and shows it only if each piece it cuts reaches the client as a read
of its own: Node's ``fetch`` hands its body stream everything that arrived since
the last read, so pieces sent back to back arrive as one read. Here a recorded
chat stream in mixed scripts is served by ``streamtape serve`` (a child
process, as a user runs it) and read by two Node clients, ten streams each:
the buggy one must be caught in every stream under ``adversarial:utf8-split``
and ``chunk=utf8-split``, and the correct one (``{stream: true}``) must get the
exact text. ``latency=instant`` written out still sends everything at once:
that is checked on the schedule, not on what the kernel happens to do. And the
server's player keeps the spacing in real time: woken late, it writes one piece
and waits again, instead of writing every piece due by then back to back.

The Node tests are skipped when ``node`` is not on the PATH.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import streamtape
from streamtape.clock import now_ns
from streamtape.profiles import APART_US, Step, StepKind, parse_profile
from streamtape.serve.player import Player, Prepared, Stop
from streamtape.wire import Framing
from tests.support import ROOT
from tests.support.builders import MS, S, chat_events, chat_ix

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node (Node.js, for its fetch client) is not on the PATH")

STREAMS = 10
WORDS = ["Grüße", " aus", " Köln", ", ", "中文", "字符", " 😀", " naïve", " café", " Ωμέγα", " привет", " 🎉!"]
"""Every word but two has a 2-, 3- or 4-byte character for utf8-split to cut."""

ENCODING = "utf-8"

CLIENT = """\
// STREAMS fetches of the replayed stream under PROFILE, one after another; prints the text
// each assembled, one JSON line per stream. MODE 'buggy' decodes each read with a fresh
// TextDecoder (a split character becomes U+FFFD); 'correct' with one {stream: true} decoder.
const [url, profile, mode, streams] = process.argv.slice(2);
for (let k = 0; k < Number(streams); k++) {
  const r = await fetch(url, {
    method: 'POST',
    headers: {'content-type': 'application/json', 'x-streamtape-profile': profile},
    body: JSON.stringify({model: 'test-model', stream: true,
                          messages: [{role: 'user', content: 'hi'}]}),
  });
  const rd = r.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let reads = 0;
  for (;;) {
    const {value, done} = await rd.read();
    if (done) break;
    reads++;
    text += mode === 'buggy' ? new TextDecoder().decode(value) : decoder.decode(value, {stream: true});
  }
  if (mode !== 'buggy') text += decoder.decode();
  console.log(JSON.stringify({status: r.status, reads, text}));
}
"""


def recording() -> streamtape.Interaction:
    """A chat stream recorded one whole event per piece, 5 ms apart (no cut inside a character)."""
    return chat_ix(gap_ms=5, events=chat_events(WORDS))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, bytes]]:
    """``streamtape serve`` on the recording: (its URL, the Node client script, the body)."""
    folder = tmp_path_factory.mktemp("node-boundaries")
    tape = folder / "chat.tape"
    ix = recording()
    streamtape.save(tape, [ix])
    script = folder / "client.mjs"
    script.write_text(CLIENT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamtape.cli", "serve", "--port", "0", str(tape)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert " on http://" in first, first
        base = first.split(" on ")[1].split()[0]
        assert ix.response is not None
        yield f"{base}/v1/chat/completions", script, ix.response.body
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def node_streams(served: tuple[str, Path, bytes], profile: str, mode: str) -> list[dict[str, object]]:
    url, script, _ = served
    assert NODE is not None
    out = subprocess.run([NODE, str(script), url, profile, mode, str(STREAMS)],
                         capture_output=True, text=True, encoding=ENCODING, timeout=120)
    assert out.returncode == 0, out.stderr
    runs = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert len(runs) == STREAMS and all(r["status"] == 200 for r in runs), out.stdout
    return runs


@needs_node
@pytest.mark.parametrize("profile", ["adversarial:utf8-split", "chunk=utf8-split"])
def test_a_fetch_client_decoding_each_read_alone_is_caught_in_every_stream(
    served: tuple[str, Path, bytes], profile: str
) -> None:
    runs = node_streams(served, profile, "buggy")
    caught = [r for r in runs if "\ufffd" in str(r["text"])]
    reads = [r["reads"] for r in runs]
    assert len(caught) == STREAMS, f"caught in {len(caught)} of {STREAMS} streams (reads per stream: {reads})"


@needs_node
@pytest.mark.parametrize("profile", ["adversarial:utf8-split", "chunk=utf8-split"])
def test_a_fetch_client_decoding_with_stream_true_gets_the_exact_text(
    served: tuple[str, Path, bytes], profile: str
) -> None:
    body = served[2].decode(ENCODING)
    runs = node_streams(served, profile, "correct")
    assert [r["text"] for r in runs] == [body] * STREAMS


def test_each_utf8_cut_is_sent_apart_by_default_and_at_once_when_latency_instant_is_written() -> None:
    ix = recording()
    for text in ["adversarial:utf8-split", "chunk=utf8-split"]:
        sends = parse_profile(text).schedule(ix).sends
        gaps = [b.at_ns - a.at_ns for a, b in itertools.pairwise(sends)]
        assert len(sends) > len(ix.pieces) and min(gaps) >= APART_US * 1000, text
    for text in ["adversarial:utf8-split;latency=instant", "chunk=utf8-split;latency=instant"]:
        s = parse_profile(text).schedule(ix)
        assert len(s.sends) > len(ix.pieces)
        assert {st.at_ns for st in s.steps} == {0}, text  # back to back, as written


def test_the_player_keeps_the_spacing_after_a_late_wake_up_instead_of_writing_what_is_due_at_once() -> None:
    gap = 3 * MS
    steps = [Step(k * gap, StepKind.SEND, b"%d" % k) for k in range(5)] + [Step(4 * gap, StepKind.END)]
    writes: list[tuple[int, bytes]] = []
    near, far = socket.socketpair()

    class Stamping:
        """The player's transport, noting when each write was made (the reader's reads
        can merge two writes on a busy machine; the writes are what the player decides)."""

        def __init__(self, real: asyncio.WriteTransport) -> None:
            self._real = real

        def write(self, data: bytes | bytearray | memoryview) -> None:
            writes.append((now_ns(), bytes(data)))
            self._real.write(data)

        def __getattr__(self, name: str) -> object:
            return getattr(self._real, name)

    def receive() -> None:
        with far:
            while far.recv(65536):
                pass

    async def play() -> None:
        _, writer = await asyncio.open_connection(sock=near)
        transport = Stamping(writer.transport)
        player = Player(Prepared.of(steps, Framing.CONTENT_LENGTH), now_ns(), transport, None, gap)  # type: ignore[arg-type]
        done = player.start()  # piece 0 now, then a timer for piece 1
        time.sleep(5 * gap / S)  # the loop wakes late: pieces 1 to 4 are all due by then
        assert await done is Stop.STEP
        writer.close()

    reader = threading.Thread(target=receive)
    reader.start()
    asyncio.run(play())
    reader.join(10)
    body = [d for _, d in writes if d in (b"0", b"1", b"2", b"3", b"4")]
    assert body == [b"0", b"1", b"2", b"3", b"4"], writes  # one write per piece, none merged
    late = [t for t, d in writes if d in body[1:]]
    # Nominally 3 ms apart; written back to back they would span ~0. Held on the span, not
    # on each gap: on a busy machine one write can be late and the next on time (1.45 ms
    # between two was seen beside a second suite), which still keeps them apart.
    assert late[-1] - late[0] >= (len(late) - 1) * gap // 2, late
    assert all(b > a for a, b in itertools.pairwise(late)), late
