"""Human renderings of ``archwheel can-load``: a plain table and Markdown for CI summaries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from archwheel.binary.demangle import demangle
from archwheel.interfaces.render.common import (
    MAX_LIBRARY_ROWS,
    bounded,
    markdown_table,
    md_code,
    md_text,
    more_rows,
    safe,
)
from archwheel.verdicts.load import (
    LibraryLoad,
    LoadReport,
    LoadVerdict,
    MissingSymbol,
    mangled_names,
)

_LABEL = {
    LoadVerdict.LOADS: "loads",
    LoadVerdict.FAILS: "DOES NOT LOAD",
    LoadVerdict.UNKNOWN: "unknown (incomplete)",
}
_STYLE = {LoadVerdict.LOADS: "green", LoadVerdict.FAILS: "bold red", LoadVerdict.UNKNOWN: "yellow"}


def symbol_text(symbol: MissingSymbol, demangled: Mapping[str, str]) -> str:
    """A missing symbol as the tables show it: its demangled name where known, with
    ``@VERSION`` when the symbol is versioned."""
    name = demangled.get(symbol.name, symbol.name)
    return f"{name}@{symbol.version}" if symbol.version else name


def _listed(report: LoadReport) -> tuple[list[LibraryLoad], int]:
    """The libraries listed (at most ``MAX_LIBRARY_ROWS``, those that do not load first)."""
    return bounded(
        report.libraries, MAX_LIBRARY_ROWS, first=lambda lib: lib.verdict is not LoadVerdict.LOADS
    )


def _library_lines(lib: LibraryLoad, demangled: Mapping[str, str]) -> list[str]:
    lines: list[str] = []
    if lib.opened_how:
        lines.append(lib.opened_how)
    if lib.symbols_checked:
        text = f"symbols: {lib.symbols_resolved} of {lib.symbols_checked} resolve"
        if lib.unverified:
            text += f", {lib.unverified} unverified"
            if lib.missing_libraries:
                text += " (they belong to the missing libraries)"
        lines.append(text)
    if lib.missing_libraries:
        lines.append("missing libraries: " + ", ".join(lib.missing_libraries))
    lines.extend(
        f"{r.needed}: found only once the package has loaded {r.path} itself (not on the search "
        "path)"
        for r in lib.resolutions
        if r.how == "package"
    )
    for file, version in lib.missing_versions:
        lines.append(f"version `{version}' not found in {file}")
    for version, policy in lib.too_new:
        lines.append(f"needs {version}: newer than {policy} allows")
    if lib.missing_symbols:
        more = lib.missing_symbol_count - len(lib.missing_symbols)
        lines.append(
            f"undefined symbols ({lib.missing_symbol_count}"
            + (f", first {len(lib.missing_symbols)} shown" if more > 0 else "")
            + "):"
        )
        lines.extend("  " + symbol_text(s, demangled) for s in lib.missing_symbols)
    lines.extend(f"cause: {c}" for c in lib.causes)
    lines.extend(f"fix: {f}" for f in lib.fixes)
    lines.extend(f"note: {p}" for p in lib.problems)
    return lines


def render_table(report: LoadReport, out: Console, demangled: Mapping[str, str]) -> None:
    """Print can-load's answer on a terminal: each library's verdict and the symbols it misses, then
    the verdict line."""
    others = "".join(f" + {w.filename}" for w in report.others)
    if len(report.others) > 3:
        others = (
            f" + {len(report.others)} other packages ("
            + ", ".join(w.name for w in report.others)
            + ")"
        )
    out.print(f"[bold]{safe(report.wheel.filename)}[/] after import torch from "
              f"{safe(report.torch.filename)}{safe(others)}")  # fmt: skip
    for fact in report.facts:
        out.print(f"  metadata: {safe(fact)}")
    if report.assumed:
        out.print(
            "  assumed loaded by torch (from wheels not given): " + safe(", ".join(report.assumed))
        )
    listed, hidden = _listed(report)
    for lib in listed:
        style = _STYLE[lib.verdict]
        out.print(f"  {safe(lib.path)}: [{style}]{_LABEL[lib.verdict]}[/]")
        for line in _library_lines(lib, demangled):
            out.print(f"      {safe(line)}")
    if hidden:
        out.print(f"  {safe(more_rows(hidden, 'libraries', MAX_LIBRARY_ROWS))}")
    for problem in report.problems:
        out.print(f"  problem: {safe(problem)}")
    out.print(f"verdict: [{_STYLE[report.verdict]}]{_LABEL[report.verdict]}[/]")


def render_markdown(report: LoadReport, demangled: Mapping[str, str]) -> str:
    """can-load's answer as Markdown (verdict, a row per library, the missing symbols) for a CI job
    summary."""
    parts = [
        f"### can-load: {md_code(report.wheel.filename)} with {md_code(report.torch.filename)}",
        "",
        f"**Verdict: {_LABEL[report.verdict]}**",
        "",
    ]
    parts.extend(f"- metadata: {fact}" for fact in report.facts)
    if report.assumed:
        parts.append("- assumed loaded by torch: " + ", ".join(md_code(a) for a in report.assumed))
    parts.append("")
    listed, hidden = _listed(report)
    rows = [
        (
            md_code(lib.path),
            _LABEL[lib.verdict],
            "<br>".join(md_text(line) for line in _library_lines(lib, demangled)) or "-",
        )
        for lib in listed
    ]
    parts.append(markdown_table(("library", "verdict", "details"), rows))
    if hidden:
        parts.append("\n" + md_text(more_rows(hidden, "libraries", MAX_LIBRARY_ROWS)))
    parts.extend(f"\n- problem: {p}" for p in report.problems)
    return "\n".join(parts) + "\n"


def demangled_names(report: LoadReport) -> dict[str, str]:
    """The demangled name of each missing C++ symbol (through c++filt; empty without it)."""
    return demangle(mangled_names(report))


def can_load_json(report: LoadReport, demangled: Mapping[str, str], code: int) -> dict[str, Any]:
    """The JSON document: the report's, each missing symbol with its demangled name, and the
    exit code."""
    document = report.to_json()
    for lib in document["libraries"]:
        for s in lib["missing_symbols"]:
            s["demangled"] = demangled.get(s["name"], s["name"])
    document["exit_code"] = code
    return document
