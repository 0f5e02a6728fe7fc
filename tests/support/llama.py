"""A real llama.cpp ``llama-server`` on 127.0.0.1, from ../shared/llama (built on first use).

Tests that use it are marked ``llama``. The build takes about 6 minutes the
first time (CI starts it in the background before installing the rest) and
under a second afterwards; ``setup.sh`` holds a lock, so a test that asks while
the build runs waits for it.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.support import ROOT
from tests.support.builders import wait_until
from tests.support.processes import start

SHARED = ROOT.parent / "shared" / "llama"


def llama_binary() -> str:
    setup = SHARED / "setup.sh"
    if not setup.exists():
        pytest.skip(f"{setup} is not there (this checkout has no ../shared beside it)")
    p = subprocess.run(["bash", str(setup)], capture_output=True, text=True, timeout=1500)
    if p.returncode != 0:
        raise RuntimeError(f"llama.cpp build failed:\n{p.stderr[-3000:]}")
    return p.stdout.strip().splitlines()[-1]


def _healthy(url: str) -> bool:
    try:
        return bool(httpx.get(url + "/health", timeout=1).json().get("status") == "ok")
    except (httpx.HTTPError, ValueError):
        return False


@contextmanager
def llama_server(model: str = "tiny") -> Iterator[str]:
    """llama-server on 127.0.0.1, port 0: the port it bound is read from its
    "listening on http://HOST:PORT" line, then /health is awaited. ``serve.sh`` and the
    server it starts are a process group of their own, stopped together."""
    llama_binary()
    with start(["bash", str(SHARED / "serve.sh"), "0", model], r"listening on (http://\S+:\d+)",
               timeout=120, new_session=True) as proc:

        def ready() -> bool:
            if not proc.running():
                raise RuntimeError(f"llama-server exited with {proc.returncode}: {proc.stderr[-2000:]}")
            return _healthy(proc.url)

        wait_until(ready, timeout=120, interval=0.1)
        yield proc.url
        proc.stop(signal.SIGTERM, timeout=10, must_exit=False)
