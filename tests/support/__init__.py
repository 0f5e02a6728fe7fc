"""What the tests and the benchmarks share: values they build, real peers, and the processes
they run. Test modules (tests/unit, tests/system) and benchmarks (``python -m bench.X``) import
these modules explicitly, and never each other.

Values (pure, no I/O):

- :mod:`~tests.support.builders`: recorded interactions, the stream bodies in them (``sse``,
  ``chat_events``, ``ndjson``), ``MS``/``S``; and ``wait_until``, the one bounded poll.
- :mod:`~tests.support.fixtures_sdk`: the recordings the real-SDK tests replay, one per wire
  format, and what each SDK must assemble from them (read with ``json`` alone).
- :mod:`~tests.support.realtime_session`: the recorded Realtime API session the WebSocket
  replay tests schedule and serve.
- :mod:`~tests.support.sse_reference`: the WHATWG event-stream algorithm written literally,
  the reference the SSE parser is checked against.
- :mod:`~tests.support.cassette_reading`: reading a damaged cassette all the way through, and
  the memory bound that must hold meanwhile (the hypothesis test and its atheris harness).
- :mod:`~tests.support.har_schema`: HAR 1.2 as a JSON Schema, for ``streamtape export --har``.

Real peers on 127.0.0.1:

- :mod:`~tests.support.servers`: ``ScriptedServer`` (a socket server whose handlers write
  exactly the bytes they are told, when told) with handlers for real servers' quirks; a raw
  client that sees every chunk; TLS certificates.
- :mod:`~tests.support.streams`: recordings a unit module and the system module beside it
  both build (the transport tests' stream, ``play``'s chat answers, the index tests' cassettes).
- :mod:`~tests.support.upstream_faults`: the faulty upstreams the recorder must pass on as they
  are (reset, stall, bad chunk, endless head), and what an httpx client sees of each.
- :mod:`~tests.support.ws_upstream`: a WebSocket upstream speaking the OpenAI Realtime events,
  and one Realtime text turn as its clients make it.
- :mod:`~tests.support.diff_backends`: the scripted backends the diff tests record, one
  scenario per request.
- :mod:`~tests.support.llama`: a real llama.cpp ``llama-server`` from ../shared/llama.

Processes and load:

- :mod:`~tests.support.processes`: the one launcher of child processes (``streamtape serve``,
  ``record``, mitmdump, llama-server, an upstream): start, read the address it prints, stop
  with a bounded wait; and /proc readings of a process and its children (RSS, CPU, descriptors).
- :mod:`~tests.support.recording`: ``streamtape record`` as a context manager, scenarios
  recorded through it, and the CLI entry point run in-process (``run_main``).
- :mod:`~tests.support.reliability`: a stamped upstream in its own process, many concurrent
  raw HTTP/1.1 streams from one event loop, and the latencies they saw.
- :mod:`~tests.support.interop_capture`: recordings made by the real tools (vcrpy,
  pytest-recording, mitmdump) for the import and export tests.
- :mod:`~tests.support.chromium`, :mod:`~tests.support.chromium_har`: headless Chromium, and
  its devtools HAR importer driven over the DevTools protocol.

:data:`ROOT` is the checkout (the folder holding ``streamtape/``, ``tests/`` and ``bench/``).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: the folder holding streamtape/, tests/, bench/ and cassettes/."""
