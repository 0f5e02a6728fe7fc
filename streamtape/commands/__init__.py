"""One module per CLI command (or small group of commands).

Each module defines ``commands``: a list of click commands. ``streamtape.cli``
discovers the modules here, so adding a command never touches a shared file.

What commands share lives in the private modules: ``_common`` (options
several commands take), ``_render`` (a piece's bytes and the setup marks as
text and JSON), ``_timeline`` (an analysis, its events and its stats as the
lines and JSON of ``show``) and ``_websocket`` (a WebSocket session for
``show`` and ``diff``).
"""
