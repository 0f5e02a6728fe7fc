"""``streamtape profiles``: the presets, the adversarial set and the profile syntax."""

from __future__ import annotations

import json

import click

from ..profiles import ADVERSARIAL, PRESETS, SYNTAX, describe, explain, parse_profile


def listing() -> str:
    """The text ``streamtape profiles`` prints."""
    width = max(len(n) for n in [*PRESETS, *(f"adversarial:{a}" for a in ADVERSARIAL)])
    lines = ["Presets:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in PRESETS.items()]
    lines += ["", "Adversarial set (every streaming client should survive each; latency=apart: "
                  "each piece sent apart, no other wait):"]
    lines += [f"  {'adversarial:' + name:<{width}}  {text}" for name, text in ADVERSARIAL.items()]
    lines += ["", SYNTAX.rstrip()]
    return "\n".join(lines)


@click.command("profiles")
@click.argument("profile", required=False)
@click.option("--json", "as_json", is_flag=True, help="Presets and the adversarial set as JSON.")
def profiles(profile: str | None, as_json: bool) -> None:
    """List replay presets, the adversarial set and the profile syntax.

    With PROFILE, check it and print what it means: the effective profile, then
    each item and what it does (exit 2 if it is malformed).
    """
    if profile is not None:
        parsed = parse_profile(profile)
        click.echo(describe(parsed))
        for line in explain(parsed):
            click.echo(line)
        return
    if as_json:
        click.echo(json.dumps({"presets": PRESETS, "adversarial": ADVERSARIAL}, indent=2))
        return
    click.echo(listing())


commands = [profiles]
