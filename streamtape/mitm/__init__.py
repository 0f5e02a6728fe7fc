"""The mitmproxy side: one addon per module, each a small class of hooks over the package.

- :mod:`.record`: :class:`~.record.RecordAddon`, the recording addon
  (``mitmdump -s addons/record.py``, ``streamtape record``), a thin driver
  around :class:`streamtape.capture.Recorder`;
- :mod:`.websocket`: the recording addon's WebSocket hooks;
- :mod:`.faults`: upstream resets passed on to the client as resets;
- :mod:`.error_answer`: the recording addon's JSON 502 for a request the
  upstream gave no response to, in place of mitmproxy's HTML page (a narrow,
  fail-safe wrap of mitmproxy's protocol-error handler, and why);
- :mod:`.replay`: :class:`~.replay.ReplayAddon`, replay through mitmproxy
  (``mitmdump -s addons/replay.py``, ``serve --proxy``), and
  :mod:`.direct`, its fast path (matched connections handed to the replay
  server below mitmproxy's HTTP layer);
- :mod:`.options`: the option rules both addons share (fail loudly, never
  run on with an addon silently inactive), and :mod:`.record_options`, each
  record option declared once (the ``--set`` name, and the ``streamtape
  record`` flag derived from it);
- :mod:`.proxy`: :func:`~.proxy.run_proxy`, mitmproxy run in this process.

This face imports nothing of mitmproxy's: importing mitmproxy costs a
noticeable part of a second, so each module is imported where it is used.
"""
