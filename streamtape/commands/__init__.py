"""One module per CLI command (or small group of commands).

Each public module defines one command, named as the module (less a trailing
``_``), in ``commands``: a list of click commands. ``streamtape.cli`` lists the
modules here without importing them and imports a module only when its
command runs, so adding a command never touches a shared file.

What commands share lives in the private modules: ``_common`` (options
several commands take), ``_render`` (a piece's bytes and the setup marks as
text and JSON), ``_timeline`` (an analysis, its events and its stats as the
lines and JSON of ``show``) and ``_websocket`` (a WebSocket session for
``show`` and ``diff``).
"""
