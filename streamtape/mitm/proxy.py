"""Running mitmproxy in this process: :func:`run_proxy`, for ``record``, ``serve --proxy``
and the pytest plugin's recorder.

What is measured about mitmproxy here (11.0.2 and 12.3.1) shapes it: the
master is made inside a running loop; the bound port is read in the
``running`` hook; connections are made lazily so a refused upstream gives the
client a 502 instead of nothing; on shutdown the listener and the open
connections are closed, or in-flight streams print CancelledError tracebacks;
bind errors, which mitmproxy only logs, become one :class:`OptionError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Mapping, Sequence

from mitmproxy.options import Options
from mitmproxy.tools.dump import DumpMaster

from ..errors import OptionError

__all__ = ["run_proxy"]


async def run_proxy(
    mode: str,
    listen_host: str,
    listen_port: int,
    addons: Sequence[object],
    on_running: Callable[[list[tuple[str, int]]], None] | None = None,
    options: Mapping[str, object] | None = None,
) -> None:
    """Run mitmproxy in this process until SIGINT/SIGTERM (or ``master.shutdown()``).

    ``mode`` is a mitmproxy mode spec (``reverse:http://host:port`` or ``regular``).
    ``on_running`` gets the bound addresses (each once) after every addon's
    ``running`` hook: the proxy listens and the addons are ready for requests.
    Raises :class:`OptionError` when the address cannot be bound.
    """
    opts = Options(listen_host=listen_host, listen_port=listen_port, mode=[mode])
    master = DumpMaster(opts, with_termlog=False, with_dumper=False)
    # mitmproxy's errorcheck prints its own "Error logged during startup" line
    # and exits; startup errors are collected below and said once, our way.
    if (ec := master.addons.get("errorcheck")) is not None:
        master.addons.remove(ec)
        ec.finish()  # and its log handler
    # Lazy: connect upstream only when a request needs it, so a refused
    # upstream gives the client a 502 instead of no response at all.
    master.options.update(connection_strategy="lazy")
    for a in addons:
        master.addons.add(a)
    if options:
        master.options.update(**options)
    bind_error: list[str] = []

    class _Running:
        def running(self) -> None:
            ps = master.addons.get("proxyserver")
            # One address per port: reverse mode to an https:// upstream listens on
            # TCP and UDP (HTTP/3) at the same address, and lists it twice.
            addrs = list(dict.fromkeys((a[0], a[1]) for a in ps.listen_addrs()))
            if not addrs:
                bind_error.append(f"cannot listen on {listen_host}:{listen_port}")
                master.shutdown()
                return
            if on_running:
                on_running(addrs)

    master.addons.add(_Running())
    loop = asyncio.get_running_loop()
    # Signals reach only the main thread: a proxy run on another thread (the
    # pytest plugin's recorder) is stopped with ``master.shutdown()`` instead.
    signals = (
        (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
    )
    for sig in signals:
        loop.add_signal_handler(sig, master.shutdown)
    # Bind errors are logged by mitmproxy's proxyserver addon; catch them.
    handler = _ErrorCollector()
    logging.getLogger("mitmproxy").addHandler(handler)
    try:
        await master.run()
    except SystemExit:
        pass
    finally:
        logging.getLogger("mitmproxy").removeHandler(handler)
        for sig in signals:
            loop.remove_signal_handler(sig)
        await _close_connections(master)
    if bind_error or (handler.errors and not master.addons.get("proxyserver").listen_addrs()):
        detail = handler.errors[0] if handler.errors else bind_error[0]
        raise OptionError(f"cannot start the proxy on {listen_host}:{listen_port}: {detail}")


class _ErrorCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.errors.append(record.getMessage().splitlines()[0])


async def _close_connections(master: DumpMaster) -> None:
    """Stop listening and cancel open connections, so in-flight streams end quietly."""
    ps = master.addons.get("proxyserver")
    with contextlib.suppress(Exception):
        await ps.servers.update([])
    for handler in list(getattr(ps, "connections", {}).values()):
        for conn in list(getattr(handler, "transports", {})):
            with contextlib.suppress(Exception):
                handler.close_connection(conn)
    for _ in range(20):
        if not getattr(ps, "connections", None):
            break
        await asyncio.sleep(0.01)
