"""A real llama.cpp ``llama-server`` on 127.0.0.1, from ../shared/llama (built on first use).

Tests that use it are marked ``llama``. The build takes about 6 minutes the
first time (CI starts it in the background before installing the rest) and
under a second afterwards; ``setup.sh`` holds a lock, so a test that asks while
the build runs waits for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port

SHARED = Path(__file__).resolve().parents[2] / "shared" / "llama"


def llama_binary() -> str:
    setup = SHARED / "setup.sh"
    if not setup.exists():
        pytest.skip(f"{setup} is not there (this checkout has no ../shared beside it)")
    p = subprocess.run(["bash", str(setup)], capture_output=True, text=True, timeout=1500)
    if p.returncode != 0:
        raise RuntimeError(f"llama.cpp build failed:\n{p.stderr[-3000:]}")
    return p.stdout.strip().splitlines()[-1]


@contextmanager
def llama_server(model: str = "tiny") -> Iterator[str]:
    llama_binary()
    port = free_port()
    proc = subprocess.Popen(
        ["bash", str(SHARED / "serve.sh"), str(port), model],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).json().get("status") == "ok":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
                raise RuntimeError(f"llama-server did not come up on {url}: {err}")
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
