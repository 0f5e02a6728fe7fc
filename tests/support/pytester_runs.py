"""What a test module that runs the pytest plugin in-process (pytester) imports first.

pytester's in-process runs drop every module a run imported once it is over.
mitmproxy's certificate store must not be imported twice in one process (a
second import of cryptography's Python classes no longer matches its Rust
core: "Algorithm must be a registered hash algorithm"), so importing this
module imports it, before any run, and keeps it (mitmproxy's ldap3 import
warns about pyasn1 names).

httpcore likewise: httpx, kept from the outer process, imports httpcore on
its first transport and caches a map of httpcore's exception classes; a run
that dropped that httpcore leaves the next run's httpcore errors unmapped (an
``httpcore.RemoteProtocolError`` where the test expects httpx's), in later
runs and in the outer process's own tests after it (tests/system/test_transport.py).
And httpcore2 for httpx2, which keeps the same map of its classes (where httpx2
is installed: not on Python 3.11).
"""

from __future__ import annotations

import contextlib
import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import mitmproxy.tools.dump  # noqa: F401

    import streamtape.mitm.record
    import streamtape.mitm.replay  # noqa: F401

import httpcore  # noqa: F401

with contextlib.suppress(ImportError):
    import httpcore2  # noqa: F401

PLUGINS = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:recording")
"""The plugins an in-process run leaves out (caches, hypothesis, VCR's recording plugin)."""


def asyncio_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester project whose async fixtures get a loop per test (pytest-asyncio's setting)."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytest ARGS`` in-process in the project, without :data:`PLUGINS`."""
    return pytester.runpytest(*PLUGINS, *args)
