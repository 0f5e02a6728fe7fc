"""The profile matrix's summary: per test, the profiles it failed under. No I/O.

This is the client-conformance view: each adversarial profile is one stream
bug a real network or server can show (split UTF-8, one byte at a time,
keep-alive comments...), so the profiles a test fails under name the bugs in
the code under test.

Results travel as ``user_properties`` of each test's reports
(``("streamtape_matrix", [test, id])``), because under pytest-xdist the
reports are all the controller, which prints the table, ever sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROPERTY = "streamtape_matrix"


@dataclass
class _Row:
    ids: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass
class MatrixResults:
    """Outcomes of matrix tests, fed one report at a time."""

    rows: dict[str, _Row] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)

    def add(self, nodeid: str, test: str, profile_id: str, when: str, failed: bool, skipped: bool) -> None:
        row = self.rows.setdefault(test, _Row())
        if nodeid not in self._seen:
            self._seen.add(nodeid)
            row.ids.append(profile_id)
        if failed and profile_id not in row.failed:
            row.failed.append(profile_id)
        elif skipped and when != "teardown" and profile_id not in row.skipped:
            row.skipped.append(profile_id)

    def lines(self) -> list[str]:
        """The table, one line per test: how many profiles, and the ones that failed."""
        if not self.rows:
            return []
        width = max(len(t) for t in self.rows)
        out = []
        for test, row in self.rows.items():
            n = len(row.ids)
            ran = f"{n} profile{'s' if n != 1 else ''}"
            if row.failed:
                verdict = f"FAILED under {len(row.failed)}: {', '.join(row.failed)}"
            elif len(row.skipped) == n:
                verdict = "skipped"
            else:
                verdict = "passed under all"
            if row.skipped and len(row.skipped) < n:
                verdict += f" ({len(row.skipped)} skipped)"
            out.append(f"{test:<{width}}  {ran:>11}  {verdict}")
        return out

    @property
    def failed_tests(self) -> int:
        return sum(1 for row in self.rows.values() if row.failed)
