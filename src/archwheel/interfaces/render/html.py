"""Self-contained HTML reports: one file that opens without a network.

``audit_html`` renders ``archwheel audit --format html``: per input, a chart of what each arch
costs per library (stored bytes, made with matplotlib and inlined as SVG), the per-library table
with each verdict in colour, the problems, and the wheel's provenance one click away (a
``<details>`` element holding ``<wheel>.provenance.json`` when it lies beside the wheel).

matplotlib is the chart library because it renders to SVG in-process, with no JavaScript
runtime to inline (Vega-Lite through altair needs vega.js from a CDN, or a bundled copy, to
draw anything), and its SVG embeds in the page as it is. It is optional (``archwheel[report]``):
without it the HTML format says how to install it and exits 4.
"""

from __future__ import annotations

import html
import io
import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from archwheel._version import __version__
from archwheel.binary.model import LibraryInventory
from archwheel.effects.files import read_document
from archwheel.errors import InputError, ToolError
from archwheel.facts.arch import CodeKind
from archwheel.interfaces.render.audit import shown_libraries
from archwheel.interfaces.render.common import (
    MAX_LIBRARY_ROWS,
    compact,
    human_bytes,
    literal,
    more_rows,
)
from archwheel.interfaces.render.variant_claims import variant_lines
from archwheel.verdicts.audit import AuditReport, LibraryVerdict

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #1b1f24; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { font-weight: 600; padding: 1px 6px; border-radius: 4px; white-space: nowrap; }
.verdict-ok { background: #dafbe1; color: #116329; }
.verdict-missing { background: #ffebe9; color: #a40e26; }
.verdict-inventory { background: #eaeef2; color: #424a53; }
.verdict-incomplete { background: #fff8c5; color: #7d4e00; }
details pre { background: #f6f8fa; padding: 1em; overflow-x: auto; max-height: 40em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
code { font-size: 0.95em; }
"""
# Bars in one input's chart: the largest libraries by stored device code (a chart of thousands
# of bars is unreadable, and matplotlib takes minutes and gigabytes to draw 20000).
MAX_CHART_LIBRARIES = 40
# A provenance or index document read beside what is rendered (a build's is a few KB).
MAX_SIDE_DOCUMENT_BYTES = 16 << 20
MAX_SIDE_DOCUMENT_NESTING = 32


def _figure_svg(rows: Mapping[str, Mapping[str, int]], title: str) -> str:
    """A horizontal stacked bar per library: the stored bytes of each arch."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ToolError(
            "the HTML report needs matplotlib for its chart",
            hint="pip install 'archwheel[report]' (or pip install matplotlib)",
        ) from None
    libraries = list(rows)
    archs = sorted({a for costs in rows.values() for a in costs}, key=_arch_order)
    height = 1.4 + 0.45 * max(1, len(libraries))
    biggest = max((sum(costs.values()) for costs in rows.values()), default=0)
    unit, scale = next(
        ((u, f) for u, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)) if biggest >= f),
        ("B", 1),
    )
    with matplotlib.rc_context({"svg.hashsalt": "archwheel", "svg.fonttype": "none"}):
        figure = Figure(figsize=(9, height), layout="constrained")
        axes = figure.add_subplot()
        left = [0.0] * len(libraries)
        colours = matplotlib.colormaps["tab20"]
        # One bar per position, labelled with the name as text: names come from the input,
        # and as categories two names cut alike would share a bar, and matplotlib would read
        # '$...$' in a name as mathtext (typeset, or a ValueError for '$\frac$').
        positions = list(range(len(libraries)))
        for n, arch in enumerate(archs):
            widths = [rows[lib].get(arch, 0) / scale for lib in libraries]
            axes.barh(positions, widths, left=left, label=arch, color=colours(n % 20))
            left = [a + b for a, b in zip(left, widths, strict=True)]
        axes.set_yticks(positions, labels=[literal(lib) for lib in libraries], parse_math=False)
        axes.set_xlabel(f"stored device code ({unit})")
        axes.set_title(title, parse_math=False)
        axes.invert_yaxis()
        if archs:
            axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _arch_order(name: str) -> tuple[int, str]:
    kind, _, number = name.partition("_")
    digits = "".join(ch for ch in number if ch.isdigit())
    return (int(digits) if digits else 0, kind)


def _costs(lib: LibraryInventory) -> dict[str, int]:
    costs: dict[str, int] = defaultdict(int)
    for row in lib.images():
        costs[row.arch] += row.stored_bytes
    return dict(costs)


def _verdict(report: AuditReport, verdict: LibraryVerdict | None) -> tuple[str, str]:
    """(css class, text)."""
    if report.expect is None or verdict is None:
        return "verdict-inventory", "inventory"
    if verdict.ok:
        return "verdict-ok", "ok"
    return "verdict-missing", "missing " + " ".join(verdict.missing)


def _provenance(source: str) -> dict[str, Any] | None:
    path = Path(source)
    beside = path.with_name(path.name + ".provenance.json")
    return _read_json(beside)  # a regular file, bounded: a FIFO of that name must not block


def _e(text: object) -> str:
    """Text from an input in HTML: ``literal`` (control characters as escapes), then escaped."""
    return html.escape(literal(text))


def _input_section(n: int, report: AuditReport) -> list[str]:
    inv = report.inventory
    e = _e
    verdicts = {v.library.path: v for v in report.libraries}
    out = [f'<section class="input" id="input-{n}">', f"<h2><code>{e(inv.source)}</code></h2>"]
    if not report.complete:
        overall = ("verdict-incomplete", "incomplete: the input could not be read completely")
    elif report.no_device_code:
        overall = ("verdict-missing", "no library has device code")
    elif report.expect is None:
        overall = ("verdict-inventory", "inventory (no --expect)")
    else:
        overall = ("verdict-ok", "ok") if report.ok else ("verdict-missing", "missing images")
    if report.complete and report.ok and not report.variant_ok:
        overall = ("verdict-missing", "variant.json claims what the device code lacks")
    expected = f"; expected <code>{e(str(report.expect))}</code>" if report.expect else ""
    out.append(
        f"<p>{e(inv.input_kind)}, {inv.members_scanned} binaries scanned, "
        f"{len(inv.device_libraries)} with device code{expected}: "
        f'<span class="verdict {overall[0]}">{e(overall[1])}</span></p>'
    )
    libraries, hidden = shown_libraries(report)
    costs = {lib.path: _costs(lib) for lib in inv.device_libraries}
    if costs:
        title = "what each arch costs, per library"
        charted = costs
        if len(inv.device_libraries) > MAX_CHART_LIBRARIES:
            largest = sorted(costs, key=lambda path: -sum(costs[path].values()))
            keep = set(largest[:MAX_CHART_LIBRARIES])
            charted = {path: c for path, c in costs.items() if path in keep}
            title += f" (the {len(charted)} largest of {len(inv.device_libraries)})"
        chart = _figure_svg(charted, title)
        out.append(f'<figure class="arch-cost-chart" id="chart-{n}">{chart}</figure>')
    out.append('<table class="libraries">')
    out.append(
        "<tr><th>library</th><th>SASS</th><th>PTX / LTO-IR</th><th>extra</th>"
        "<th>device code</th><th>verdict</th></tr>"
    )
    for lib in libraries:
        verdict = verdicts.get(lib.path)
        css, text = _verdict(report, verdict)
        sass = sorted({r.arch for r in lib.images() if r.kind is CodeKind.SASS}, key=_arch_order)
        other = sorted(
            {r.arch for r in lib.images() if r.kind is not CodeKind.SASS}, key=_arch_order
        )
        extra = compact(verdict.extra) if verdict is not None and report.expect else "-"
        out.append(
            f'<tr class="library" data-library="{e(lib.path)}"><td><code>{e(lib.path)}</code>'
            f"</td><td>{e(compact(sass))}</td><td>{e(compact(other))}</td><td>{e(extra)}</td>"
            f'<td class="num">{e(human_bytes(sum(costs[lib.path].values())))}</td>'
            f'<td><span class="verdict {css}">{e(text)}</span></td></tr>'
        )
    out.append("</table>")
    if hidden:
        out.append(f'<p class="more">{e(more_rows(hidden, "libraries", MAX_LIBRARY_ROWS))}</p>')
    if inv.problems:
        out.append('<h3>problems</h3><ul class="problems">')
        for p in inv.problems:
            where = f"{p.member}: " if p.member else ""
            out.append(f"<li>{e(p.severity.value)}: {e(where + p.message)}</li>")
        out.append("</ul>")
    if report.variant is not None:
        out.append('<h3>variant.json</h3><ul class="variant">')
        out.extend(f"<li>{e(line)}</li>" for line in variant_lines(report.variant))
        out.append("</ul>")
    provenance = _provenance(inv.source)
    if provenance is not None:
        out.append(
            '<details class="provenance"><summary>provenance</summary><pre>'
            + e(json.dumps(provenance, indent=2))
            + "</pre></details>"
        )
    out.append("</section>")
    return out


def audit_html(reports: Sequence[AuditReport]) -> str:
    """The whole self-contained page for one or more audited inputs."""
    body: list[str] = ["<h1>archwheel audit</h1>"]
    for n, report in enumerate(reports):
        body.extend(_input_section(n, report))
    return page("archwheel audit", body)


def page(title: str, body: Sequence[str]) -> str:
    """A whole self-contained HTML page of ``title`` and ``body`` with archwheel's style sheet and
    version footer."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + f"\n<footer><p>archwheel {html.escape(__version__)}</p></footer>\n</body>\n</html>\n"
    )


# -- the index's index.html -----------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object of a side document (bounded, a regular file), or None: a report shows
    what it can read and leaves out the rest."""
    try:
        document, _ = read_document(path, MAX_SIDE_DOCUMENT_BYTES, MAX_SIDE_DOCUMENT_NESTING)
    except InputError:
        return None
    return document if isinstance(document, dict) else None


def _wheel_costs(audit: Mapping[str, Any] | None) -> dict[str, int]:
    costs: dict[str, int] = defaultdict(int)
    for report in (audit or {}).get("inputs", []):
        for row in report.get("archs", []):
            costs[str(row["arch"])] += int(row["stored_bytes"])
    return dict(costs)


def index_html(tree: Path) -> str:
    """The index tree's ``index.html``: every wheel with what it was built for and audited
    against, a chart of what each arch costs per wheel across the matrix, the find-links pages,
    and each wheel's provenance and audit one click away (inlined: the page needs nothing else).
    """
    e = html.escape
    manifest = _read_json(tree / "index.json") or {"entries": []}
    entries = sorted(manifest.get("entries", []), key=lambda x: str(x["file"]))
    audits = {x["file"]: _read_json(tree / "wheels" / f"{x['file']}.audit.json") for x in entries}
    body = ["<h1>archwheel wheel index</h1>"]
    body.append(
        '<p><a href="simple/">simple/</a> is the PEP 503 index '
        "(<code>pip install --index-url .../simple/ NAME</code>); "
        f"{len(entries)} wheels, each audited by archwheel before it was published.</p>"
    )
    pages = sorted({p.name for p in tree.glob("torch-*.html")})
    if pages:
        body.append('<h2>find-links pages</h2><ul class="find-links">')
        body += [f'<li><a href="{e(p)}">{e(p)}</a></li>' for p in pages]
        body.append("</ul>")
    rows = {x["file"]: c for x in entries if (c := _wheel_costs(audits[x["file"]]))}
    if rows:
        chart = _figure_svg(rows, "what each arch costs, per wheel")
        body.append(f'<figure class="arch-cost-chart" id="chart-index">{chart}</figure>')
    body.append('<table class="wheels">')
    body.append(
        "<tr><th>wheel</th><th>torch</th><th>CUDA</th><th>Requires-Python</th>"
        "<th>audited against</th><th>device code</th><th>verdict</th><th>details</th></tr>"
    )
    for x in entries:
        audit = audits[x["file"]]
        ok = audit is not None and bool(audit.get("ok")) and bool(audit.get("complete"))
        css, text = ("verdict-ok", "audited ok") if ok else ("verdict-missing", "no audit")
        details = []
        provenance = _read_json(tree / "wheels" / f"{x['file']}.provenance.json")
        if provenance is not None:
            details.append(
                '<details class="provenance"><summary>provenance</summary><pre>'
                + e(json.dumps(provenance, indent=2))
                + "</pre></details>"
            )
        if audit is not None:
            details.append(
                '<details class="audit"><summary>audit</summary><pre>'
                + e(json.dumps(audit, indent=2))
                + "</pre></details>"
            )
        size = human_bytes(sum(_wheel_costs(audit).values()))
        body.append(
            f'<tr class="wheel" data-wheel="{e(str(x["file"]))}">'
            f'<td><a href="wheels/{e(quote_path(str(x["file"])))}">{e(str(x["file"]))}</a></td>'
            f"<td>{e(str(x.get('torch') or '-'))}</td><td>{e(str(x.get('cuda') or '-'))}</td>"
            f"<td>{e(str(x.get('requires_python') or '-'))}</td>"
            f"<td>{e(str(x.get('expect') or 'inventory'))}</td>"
            f'<td class="num">{e(size)}</td>'
            f'<td><span class="verdict {css}">{e(text)}</span></td>'
            f"<td>{''.join(details) or '-'}</td></tr>"
        )
    body.append("</table>")
    return page("archwheel wheel index", body)


def quote_path(name: str) -> str:
    """``name`` percent-quoted for a relative link in a page (a wheel's file name may hold ``+`` and
    ``!``)."""
    return quote(name)


def index_renderer() -> Callable[[Path], str] | None:
    """``index_html`` when matplotlib is importable, else None (the plain landing page)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    return index_html
