"""Running mitmproxy in this process: :func:`run_proxy`, for ``record``, ``serve --proxy``
and the pytest plugin's recorder.

What is measured about mitmproxy here (11.0.2 and 12.3.1) shapes it: the
master is made inside a running loop; the bound port is read in the
``running`` hook; connections are made lazily so a refused upstream gives the
client a 502 instead of nothing; on shutdown the listener and the open
connections are closed, or in-flight streams print CancelledError tracebacks;
bind errors, which mitmproxy only logs, become one :class:`OptionError`.

``record --workers N`` runs N of these proxies on one port (``reuse_port``):
mitmproxy binds with ``asyncio.start_server(handler, host, port)`` in
``mitmproxy.proxy.mode_servers`` (11.0 and 12.x alike) and has no option for
``SO_REUSEPORT``, so a worker, a process streamtape owns, gives that module an
``asyncio`` whose ``start_server`` asks for it (:func:`_share_the_port`).
Nothing else in mitmproxy changes, and a process that is not a worker never
gets it. A reverse proxy to an ``https://`` upstream also listens on UDP for
HTTP/3, through ``mitmproxy_rs``, which cannot share a port: the first worker
keeps it, and the others listen on TCP only (``tcp_only``: their parsed mode,
which mitmproxy caches per spec, says ``tcp`` instead of ``both``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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
    *,
    reuse_port: bool = False,
    tcp_only: bool = False,
    lifeline: int | None = None,
) -> None:
    """Run mitmproxy in this process until SIGINT/SIGTERM (or ``master.shutdown()``).

    ``mode`` is a mitmproxy mode spec (``reverse:http://host:port`` or ``regular``).
    ``on_running`` gets the bound addresses (each once) after every addon's
    ``running`` hook: the proxy listens and the addons are ready for requests.
    Raises :class:`OptionError` when the address cannot be bound.

    ``reuse_port``: listen with ``SO_REUSEPORT``, beside other processes on the
    same port (a worker of ``record --workers``); ``tcp_only``: no UDP
    (HTTP/3) listener beside it, which another worker has. ``lifeline``: a file
    descriptor whose readability (its writer, the parent, is gone) stops the
    proxy as a signal would.
    """
    if reuse_port:
        _share_the_port()
    if tcp_only:
        _tcp_only(mode)
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
    if lifeline is not None:
        loop.add_reader(lifeline, master.shutdown)
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
        if lifeline is not None:
            loop.remove_reader(lifeline)
        await _close_connections(master)
    if bind_error or (handler.errors and not master.addons.get("proxyserver").listen_addrs()):
        detail = handler.errors[0] if handler.errors else bind_error[0]
        raise OptionError(f"cannot start the proxy on {listen_host}:{listen_port}: {detail}")


class _ReusePortAsyncio:
    """The ``asyncio`` module as ``mode_servers`` sees it in a worker: the same, except
    that ``start_server`` binds with ``SO_REUSEPORT``."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    async def start_server(self, *args: Any, **kwargs: Any) -> asyncio.Server:
        kwargs.setdefault("reuse_port", True)
        server: asyncio.Server = await self._real.start_server(*args, **kwargs)
        return server


def _share_the_port() -> None:
    """Make mitmproxy's TCP listeners in this process bind with ``SO_REUSEPORT``."""
    from mitmproxy.proxy import mode_servers

    real = getattr(mode_servers, "asyncio")  # noqa: B009 - not among its exported names
    if not isinstance(real, _ReusePortAsyncio):
        setattr(mode_servers, "asyncio", _ReusePortAsyncio(real))  # noqa: B010


def _tcp_only(spec: str) -> None:
    """Make mitmproxy's mode for ``spec`` listen on TCP alone in this process."""
    from mitmproxy.proxy.mode_specs import ProxyMode

    mode = ProxyMode.parse(spec)  # the instance mitmproxy gets for the spec: parse is cached
    if mode.transport_protocol == "both":
        object.__setattr__(mode, "transport_protocol", "tcp")


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
