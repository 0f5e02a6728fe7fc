"""Shell completion (click's ``_STREAMTAPE_COMPLETE``): the installed ``streamtape`` prints the
bash, zsh and fish scripts docs/howto/completion.md tells users to source, and answers a
completion request with the commands and the options of the lazily loaded command."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.processes import STREAMTAPE


def complete(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(STREAMTAPE, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("shell", "marker"), [
    ("bash", "complete -o nosort -F _streamtape_completion streamtape"),
    ("zsh", "#compdef streamtape"),
    ("fish", "complete --no-files --command streamtape"),
])
def test_the_completion_script_of_each_shell_is_printed(shell, marker) -> None:
    r = complete({"_STREAMTAPE_COMPLETE": f"{shell}_source"})
    assert r.returncode == 0, r.stderr
    assert marker in r.stdout
    assert "_STREAMTAPE_COMPLETE" in r.stdout  # the script calls back into streamtape


def test_completion_offers_the_commands_and_a_commands_options() -> None:
    r = complete({"_STREAMTAPE_COMPLETE": "bash_complete", "COMP_WORDS": "streamtape s", "COMP_CWORD": "1"})
    assert r.returncode == 0, r.stderr
    assert {"plain,serve", "plain,show"} <= set(r.stdout.split())
    r = complete({"_STREAMTAPE_COMPLETE": "bash_complete", "COMP_WORDS": "streamtape show --ht", "COMP_CWORD": "2"})
    assert r.stdout.split() == ["plain,--html"]
