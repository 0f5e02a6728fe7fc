"""A real llama.cpp ``llama-server`` on 127.0.0.1, from ../shared/llama (built on first use).

Tests that use it are marked ``llama``. The build takes about 6 minutes the
first time (CI starts it in the background before installing the rest) and
under a second afterwards; ``setup.sh`` holds a lock, so a test that asks while
the build runs waits for it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.support import ROOT
from tests.support.builders import wait_until

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
    "listening on http://HOST:PORT" line, then /health is awaited."""
    llama_binary()
    proc = subprocess.Popen(
        ["bash", str(SHARED / "serve.sh"), "0", model],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    log: deque[str] = deque(maxlen=50)
    bound: list[str] = []

    def read() -> None:
        # Reads stderr to the end, so llama-server's per-request log never fills the pipe.
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if not bound and (m := re.search(r"listening on (http://\S+:\d+)", line)):
                bound.append(m.group(1))

    threading.Thread(target=read, daemon=True).start()

    def running() -> None:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode}: {''.join(log)[-2000:]}")

    def started() -> str | None:
        running()
        return bound[0] if bound else None

    def ready() -> bool:
        running()
        return _healthy(url)

    try:
        url = wait_until(started, timeout=120)
        wait_until(ready, timeout=120, interval=0.1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
