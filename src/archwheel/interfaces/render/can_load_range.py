"""Renderings of ``archwheel can-load --torch``: one row per torch release (text and Markdown),
and the JSON document with the missing symbols demangled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from archwheel.binary.demangle import demangle
from archwheel.interfaces.render.common import markdown_table, md_code, md_text, safe
from archwheel.text import literal
from archwheel.verdicts.load import LoadVerdict, mangled_names
from archwheel.verdicts.torch_range import TorchCheck, TorchRangeReport

_LABEL = {
    LoadVerdict.LOADS: "loads",
    LoadVerdict.FAILS: "DOES NOT LOAD",
    LoadVerdict.UNKNOWN: "unknown (incomplete)",
}
_STYLE = {LoadVerdict.LOADS: "green", LoadVerdict.FAILS: "bold red", LoadVerdict.UNKNOWN: "yellow"}
SYMBOLS_SHOWN = 3  # the first missing symbols shown per torch (all are in the JSON)


def demangled_range(report: TorchRangeReport) -> dict[str, str]:
    """The demangled names of every missing symbol of every torch checked, demangled in one call to
    the demangler."""
    names = sorted({n for c in report.checks if c.report for n in mangled_names(c.report)})
    return demangle(names)


def _why(check: TorchCheck, demangled: Mapping[str, str]) -> str:
    """What the row says beside its verdict: the first missing symbols and the cause."""
    if check.report is None:
        return check.error or "not checked"
    parts: list[str] = []
    missing = [s for lib in check.report.libraries for s in lib.missing_symbols]
    count = sum(lib.missing_symbol_count for lib in check.report.libraries)
    if missing:
        names = [demangled.get(s.name, s.name) for s in missing[:SYMBOLS_SHOWN]]
        more = f" (+{count - len(names)} more)" if count > len(names) else ""
        parts.append("missing " + "; ".join(names) + more)
    libraries = sorted({n for lib in check.report.libraries for n in lib.missing_libraries})
    if libraries:
        parts.append("missing libraries " + ", ".join(libraries))
    causes = list(dict.fromkeys(c for lib in check.report.libraries for c in lib.causes))
    if causes:
        parts.append(causes[0])
    problems = [p for lib in check.report.libraries for p in lib.problems]
    if problems and not parts:
        parts.append(problems[0])
    return " | ".join(parts)


def _read(check: TorchCheck) -> str:
    if check.cached:
        return "cached"
    size = f" of {check.size >> 20} MiB" if check.size else ""
    whole = ", whole (no ranges)" if check.whole_download else ""
    return f"{check.fetched >> 20} MiB{size}{whole}"


def _summary(report: TorchRangeReport) -> list[str]:
    lines = [
        f"{report.wheel.filename} ({report.interpreter}, {report.machine}) against torch "
        f"{report.request}: {_LABEL[report.verdict]}",
    ]
    if report.loads_with:
        lines.append("loads with torch " + ", ".join(report.loads_with))
    if report.not_found:
        lines.append("not on the indexes: torch " + ", ".join(report.not_found))
    if report.total_size:
        share = 100 * report.fetched / report.total_size
        lines.append(
            f"read {report.fetched >> 20} MiB of the torch wheels' {report.total_size >> 20} MiB "
            f"({share:.1f}%) from the network"
        )
    return lines


def render_range_table(
    report: TorchRangeReport, out: Console, demangled: Mapping[str, str]
) -> None:
    """Print ``can-load --torch``: one line per torch release with its verdict and why, then the
    summary."""
    for check in report.checks:
        label = _LABEL[check.verdict]
        out.print(
            f"[{_STYLE[check.verdict]}]{label:>20}[/]  torch {safe(check.version):<12} "
            f"{safe(_read(check))}",
            highlight=False,
        )
        why = _why(check, demangled)
        if why:
            out.print(f"{'':>22}{literal(why)}", highlight=False, markup=False)
    for line in _summary(report):
        out.print(literal(line), highlight=False, markup=False)


def render_range_markdown(report: TorchRangeReport, demangled: Mapping[str, str]) -> str:
    """``can-load --torch`` as Markdown: a row per torch release, then the summary lines, for a CI
    job summary."""
    rows = [
        [md_code(c.version), md_text(_LABEL[c.verdict]), md_text(_why(c, demangled)),
         md_text(_read(c))]
        for c in report.checks
    ]  # fmt: skip
    head = f"### can-load: {md_code(report.wheel.filename)} across torch {md_code(report.request)}"
    body = markdown_table(["torch", "verdict", "why", "read"], rows)
    tail = "\n".join(f"- {md_text(line)}" for line in _summary(report))
    return f"{head}\n\n{body}\n{tail}\n"


def range_json(
    report: TorchRangeReport, demangled: Mapping[str, str], exit_code: int
) -> dict[str, Any]:
    """The JSON document of ``can-load --torch --format json``: the report with each missing
    symbol's demangled name and the exit code."""
    document = report.to_json()
    for torch in document["torches"]:
        if torch["report"] is None:
            continue
        for lib in torch["report"]["libraries"]:
            for s in lib["missing_symbols"]:
                s["demangled"] = demangled.get(s["name"], s["name"])
    document["exit_code"] = exit_code
    return document
