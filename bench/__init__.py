"""The benchmarks: each prints its figures beside a baseline measured in the same run.

Each is a module of this package, run from the checkout::

    .venv/bin/python -m bench.replay --help

so that ``streamtape``, ``bench`` and ``tests.support`` (the helpers the tests share: scripted
upstreams, the process launcher, /proc readings) import as the packages they are, with no
``sys.path`` edits. ``_common`` and ``_loadgen`` are parts the benchmarks share, not
benchmarks.
"""
