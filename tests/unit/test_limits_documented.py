"""The table of limits in docs/limits.md states each limit as the code has it.

Every row names its constants (``module.NAME``, or ``NAME`` of the module named before it in
the same cell); each constant must exist and its value, written as the table writes numbers
(``65536``, ``16 MiB``, ``4 GiB``), must appear in the row's value cell.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "limits.md"


def _rows() -> list[tuple[str, str, list[str]]]:
    text = DESIGN.read_text(encoding="utf-8")
    section = text[text.index("# Limits and bad input") :]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("limit", "---"):
            continue
        rows.append((cells[0], cells[1], re.findall(r"`([\w.]+)`", cells[2])))
    return rows


def _shown(value: int) -> set[str]:
    forms = {str(value)}
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            forms.add(f"{value >> shift} {unit}")
    return forms


def test_every_documented_limit_matches_the_code() -> None:
    rows = _rows()
    assert len(rows) >= 15
    for what, value_cell, names in rows:
        assert names, f"row {what!r} names no constant"
        module_name = ""
        for name in names:
            if "." in name:
                module_name, _, constant = name.rpartition(".")
            else:
                constant = name
            module = importlib.import_module(_module(module_name))
            value = getattr(module, constant)
            assert any(form in value_cell for form in _shown(value)), (what, constant, value)


def _module(short: str) -> str:
    prefixes = {
        "stream": "archwheel.binary.stream",
        "speedups": "archwheel.binary.speedups",
        "elf": "archwheel.binary.elf",
        "layout": "archwheel.binary.layout",
        "zipread": "archwheel.binary.zipread",
        "payload": "archwheel.binary.payload",
        "wheelmeta": "archwheel.binary.wheelmeta",
        "dynamic": "archwheel.binary.dynamic",
        "scan.bounds": "archwheel.binary.scan.bounds",
        "rawcubin": "archwheel.binary.rawcubin",
        "scan.inputs": "archwheel.binary.scan.inputs",
        "scan.pool": "archwheel.binary.scan.pool",
        "verdicts.manifest": "archwheel.verdicts.manifest",
        "verdicts.load": "archwheel.verdicts.load",
        "build.recipe": "archwheel.wheelbuild.recipes.recipe",
        "build.source": "archwheel.wheelbuild.sources.source",
        "build.jobs": "archwheel.wheelbuild.compile.jobs",
        "build.dist_farm": "archwheel.wheelbuild.compile.dist_farm",
        "build.project_constraints": "archwheel.wheelbuild.sources.project_constraints",
        "verdicts.compile_failure": "archwheel.verdicts.compile_failure",
        "matrix.plan": "archwheel.matrix.plan",
        "matrix.index": "archwheel.matrix.index",
        "inspection.diffing": "archwheel.inspection.diffing",
        "inspection.build_files": "archwheel.inspection.build_files",
        "binary.buildfile": "archwheel.binary.buildfile",
        "commands.options": "archwheel.interfaces.commands.options",
        "cli": "archwheel.interfaces.cli",
        "effects.process": "archwheel.effects.process",
        "effects.net": "archwheel.effects.net",
        "effects.deadline": "archwheel.effects.deadline",
        "inspection.torch_range": "archwheel.inspection.torch_range",
        "effects.redis_relay": "archwheel.effects.redis_relay",
        "effects.farm_proxy": "archwheel.effects.farm_proxy",
        "effects.farm_route": "archwheel.effects.farm_route",
        "effects.watchdog": "archwheel.effects.watchdog",
        "render.common": "archwheel.interfaces.render.common",
        "render.html": "archwheel.interfaces.render.html",
        "render.manifest": "archwheel.interfaces.render.manifest",
    }
    return prefixes[short]


def test_audit_help_states_the_scanner_limits() -> None:
    from archwheel.binary import zipread
    from archwheel.binary.scan import bounds, inputs
    from archwheel.interfaces.commands.audit import DESCRIPTION
    from archwheel.interfaces.render import common

    text = " ".join(DESCRIPTION.split())
    for value in (
        bounds.MAX_CONTAINERS,
        bounds.MAX_ENTRIES,
        bounds.MAX_ENTRIES_PER_CONTAINER,
        bounds.MAX_RAW_CUBINS,
        bounds.MAX_PROBLEMS_PER_LIBRARY,
        inputs.MAX_PROBLEMS_PER_INPUT,
        zipread.MAX_ARCHIVE_MEMBERS,
        common.MAX_LIBRARY_ROWS,
    ):
        assert str(value) in text, value
