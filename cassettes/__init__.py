"""The example cassettes and the script that re-records them (a package only so that
``python -m cassettes.record_examples`` imports ``tests.support`` from the checkout)."""
