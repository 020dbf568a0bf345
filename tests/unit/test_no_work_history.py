"""The project speaks of itself, not of how it was made: no line of the README, docs/, src/ or
tests/ names a work session, an issue number or a "round", and the docs hold no measurement
diary (a date or a clock time of who measured when): a figure comes with the command that
reproduces it (docs/maintainers/performance.md).

The patterns are built from pieces so that this file does not match itself. What stays
allowed, and why:

- "nox session", ``nox.Session``, pytest's "session-scoped" fixtures, "the session's X
  fixture" and "CI runs that session" (a nox session): a session of a tool, never a numbered or
  "this" one, so no pattern below matches;
- ``round(x, 3)``, "round trip", "the other way round": no number or ordinal follows "round";
- dates in src/ and tests/: the facts file dates its sources (``cuda_facts.toml``: when a
  release's list was read), and a test names the moment an epoch stands for.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_ISSUE = "issue"
_SESSION = "session"
_ROUND = "round"
_NUMBER = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|\d+)"
_ORDINAL = r"(?:first|second|third|fourth|fifth|last|previous|next|earlier|later|this)"

# Everywhere in the four places: a numbered issue or session, this or another work session, a
# numbered or ordinal round (the examples are in the first test below).
WORK_HISTORY = re.compile(
    "|".join(
        (
            rf"\b{_ISSUE}s? #?\d",
            rf"\b{_SESSION}s? \d",
            rf"\b(?:this|previous|earlier|later|next) {_SESSION}\b",
            rf"\b{_ROUND}s? {_NUMBER}\b",
            rf"\b{_ORDINAL} {_ROUND}\b",
        )
    ),
    re.IGNORECASE,
)

# In the README and docs/ only: when a figure was measured is not what a reader needs.
DIARY = re.compile(r"\b20\d\d-\d\d-\d\d\b|\b\d{1,2}:\d\d(?:-\d{1,2}:\d\d)? UTC\b")

# Text files of src/ and tests/ (the built extension and caches are not the project's text).
SUFFIXES = {".py", ".pyi", ".c", ".h", ".cu", ".S", ".toml", ".json", ".md", ".sh", ".txt"}


def _files() -> list[tuple[Path, bool]]:
    """Each file to read, and whether it is documentation (README or docs/)."""
    found = [(ROOT / "README.md", True)]
    found += [(p, True) for p in sorted((ROOT / "docs").rglob("*.md"))]
    for top in ("src", "tests"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                found.append((path, False))
    return found


def offending_lines(text: str, *, documentation: bool) -> list[tuple[int, str]]:
    """The lines of ``text`` that name a session, an issue or a round (and, in documentation,
    a date or a clock time), with their numbers."""
    hits = []
    for number, line in enumerate(text.splitlines(), start=1):
        if WORK_HISTORY.search(line) or (documentation and DIARY.search(line)):
            hits.append((number, line.strip()))
    return hits


def test_the_patterns_catch_work_history_and_spare_ordinary_words() -> None:
    caught = [
        f"What changed ({_ISSUE} 29):",
        f"Targets ({_ISSUE}s 2 and 26)",
        f"the audit at the limit ({_SESSION.title()} 11)",
        f"Not yet run on a GPU: this {_SESSION} had no device.",
        f"fixed in {_ROUND} two",
        f"after the first {_ROUND}",
    ]
    spared = [
        "pytest's session-scoped fixture, memoized by the session's cuobjdump fixture",
        "def tests(session: nox.Session) -> None:  # a nox session",
        "`nox -s sanitize` runs the property tests; CI runs that session.",
        '"seconds": round(self.seconds, 3),',
        "the round trip catches tampered files; sm_120 lost the other way round",
        "see docs/exit-codes.md, the issues a user meets",
    ]
    for line in caught:
        assert offending_lines(line, documentation=False), line
    for line in spared:
        assert not offending_lines(line, documentation=True), line
    assert offending_lines("Measured 2026-11-30 on the 2-core machine", documentation=True)
    assert offending_lines("12:49 UTC, load average 0.87", documentation=True)
    assert not offending_lines("the facts read on 2026-12-01", documentation=False)


def test_no_line_names_a_session_an_issue_or_a_round() -> None:
    found = []
    for path, documentation in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in offending_lines(text, documentation=documentation):
            found.append(f"{path.relative_to(ROOT)}:{number}: {line[:120]}")
    assert not found, "\n".join(found)
