"""mkdocs hook: the profile language page, generated from the profile registry itself.

``<!-- streamtape:profiles -->`` in a page becomes the presets, the adversarial
set and one table per key (``chunk=``, ``latency=``, ``fault=``, ``framing=``,
``newline=``): every kind of its vocabulary (the ``StrEnum`` of
:mod:`streamtape.profiles.model`), the arguments it takes (the parser's own
arity tables), what it does (its entry in :data:`streamtape.profiles.SYNTAX`,
the text ``streamtape profiles`` prints) and an example that
:func:`streamtape.profiles.parse_profile` has just accepted, with what
:func:`streamtape.profiles.describe` makes of it. A kind the syntax text does
not explain, or an example the parser refuses, fails the build: the page
cannot drift from the code.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from streamtape.profiles import (
    ADVERSARIAL,
    PRESETS,
    SYNTAX,
    ChunkKind,
    FaultKind,
    FramingKind,
    LatencyKind,
    NewlineKind,
    describe,
    parse_profile,
)
from streamtape.profiles import parse as _parse

MARKER = "<!-- streamtape:profiles -->"
KEYS: dict[str, type[StrEnum]] = {
    "chunk": ChunkKind,
    "latency": LatencyKind,
    "fault": FaultKind,
    "framing": FramingKind,
    "newline": NewlineKind,
}
ARITY: dict[str, Any] = {
    "chunk": _parse._CHUNK_ARITY,
    "latency": _parse._LATENCY_ARITY,
    "fault": _parse._FAULT_ARITY,
}
SAMPLE = {"N": "3", "A": "1", "B": "16", "MS": "50", "US": "2000", "F": "0.5", "TTFT_MS": "300",
          "GAP_MS": "40", "P": "50", "NB": "200B", "S": "2", "CODE": "503"}
"""What an example puts for each placeholder of the syntax text."""
SAMPLE_BY_KIND = {("fault", "close"): {"CODE": "1011"}, ("fault", "keepalive"): {"S": "0"}}


def _sections() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """SYNTAX cut into its keys: the key's own line, then (form, description) per entry."""
    out: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    key = None
    for line in SYNTAX.splitlines():
        m = re.match(r"^(\w+)=\s+(.*)$", line)
        if m and m.group(1) in KEYS:
            key = m.group(1)
            out[key] = (m.group(2), [])
        elif key and re.match(r"^  \S", line):
            m2 = re.match(r"^(\S+(?: \| \S+)*)\s*(.*)$", line.strip())
            assert m2 is not None
            out[key][1].append((m2.group(1), m2.group(2).strip()))
        elif key and re.match(r"^ {3,}\S", line):
            entries = out[key][1]
            if entries:
                entries[-1] = (entries[-1][0], entries[-1][1] + " " + line.strip())
            else:
                out[key] = (out[key][0] + " " + line.strip(), entries)
        elif line and not line.startswith(" "):
            key = None
    return out


def _alternatives(form: str) -> list[str]:
    return [f.strip() for f in form.split("|")]


def _kind_of(alternative: str) -> str:
    return re.split(r"[:\[]", alternative, maxsplit=1)[0]


def _example(key: str, kind: str, alternative: str) -> str:
    subs = {**SAMPLE, **SAMPLE_BY_KIND.get((key, kind), {})}
    text = alternative.replace("[", "").replace("]", "")
    return re.sub(r"\b[A-Z][A-Z_]*\b", lambda m: subs.get(m.group(0), m.group(0)), text)


def _cell(s: str) -> str:
    return s.replace("|", "\\|")


def render() -> str:
    sections = _sections()
    out = ["## Presets", "", "| preset | items |", "| --- | --- |"]
    out += [f"| `{n}` | `{t}` |" for n, t in PRESETS.items()]
    out += ["", "## The adversarial set", "",
            "`adversarial:*` in the pytest plugin's `--streamtape-profile` runs a test under each.", "",
            "| preset | items |", "| --- | --- |"]
    out += [f"| `adversarial:{n}` | `{t}` |" for n, t in ADVERSARIAL.items()]
    for key, enum in KEYS.items():
        if key not in sections:
            raise ValueError(f"profiles hook: SYNTAX has no {key}= section")
        head, entries = sections[key]
        documented: dict[str, tuple[list[str], str]] = {}
        for form, text in entries:
            for alt in _alternatives(form):
                documented.setdefault(_kind_of(alt), ([], text))[0].append(alt)
        out += ["", f"## `{key}=`", "", head[0].upper() + head[1:] + ("." if not head.endswith(".") else ""), "",
                "| item | arguments | what it does | example | means |", "| --- | --- | --- | --- | --- |"]
        for member in enum:
            kind = str(member)
            if kind not in documented:
                raise ValueError(f"profiles hook: {key}={kind} is not explained in streamtape.profiles.SYNTAX")
            alts, text = documented[kind]
            arity = ARITY.get(key, {}).get(member, 0)
            optional = member in _parse._OPTIONAL_ARGUMENT
            args = "none" if arity == 0 else f"{arity}{' (optional)' if optional else ''}"
            examples = [f"{key}={_example(key, kind, alt)}" for alt in alts]
            # describe(parse_profile(...)): an example the parser refuses fails the build.
            meanings = [describe(parse_profile(e)) for e in examples]
            form = " \\| ".join(f"`{a}`" for a in alts)
            out.append(f"| {form} | {args} | {_cell(text)} | " + "<br>".join(f"`{e}`" for e in examples)
                       + " | " + "<br>".join(f"`{m}`" for m in meanings) + " |")
    out += ["", "## `seed=`", "", "`seed=N`: " + next(
        (ln.split(None, 1)[1] for ln in SYNTAX.splitlines() if ln.startswith("seed=")), "the random seed"), ""]
    out += ["## As `streamtape profiles` prints it", "", "```", SYNTAX.rstrip(), "```"]
    return "\n".join(out)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())
