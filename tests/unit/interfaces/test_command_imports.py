"""The command modules use the floors below only through their public names, and the command
line starts at once: ``--help``, ``--version`` and a refused argument import nothing heavy."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import archwheel
from archwheel._lazy import public_names
from archwheel.interfaces.commands import COMMANDS, SUMMARY

PACKAGE = Path(archwheel.__file__).parent
COMMANDS_DIR = PACKAGE / "interfaces" / "commands"
# The packages whose public names (``__all__``, bound lazily) the command modules may import.
FLOOR_PACKAGES = (
    "facts",
    "effects",
    "binary",
    "verdicts",
    "inspection",
    "wheelbuild",
    "smoke",
    "doctor",
    "crosscheck",
    "matrix",
    "housekeeping",
)
# Packages that declare their public names: every floor and use case.
DECLARED = (
    "facts", "effects", "binary", "verdicts", "inspection", "smoke", "doctor", "crosscheck",
    "wheelbuild", "matrix", "housekeeping",
)  # fmt: skip
EXEMPT: set[str] = set()
# Beside the floors: any module may import them.
SHARED = {
    "archwheel",
    "archwheel._version",
    "archwheel.errors",
    "archwheel.exit_codes",
    "archwheel.text",
}


def floor_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of each import of a floor's module by ``path``; name is None for
    ``import archwheel.x``."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.extend((node.lineno, node.module, a.name) for a in node.names)
    return [
        (line, module, name)
        for line, module, name in found
        if module.split(".")[0] == "archwheel"
        and module not in SHARED
        and not module.startswith("archwheel.interfaces")
    ]


def public_name_violations(path: Path) -> list[str]:
    bad = []
    for line, module, name in floor_imports(path):
        where = f"{path.name}:{line}"
        parts = module.split(".")
        if len(parts) != 2 or parts[1] not in FLOOR_PACKAGES or name is None:
            bad.append(f"{where} imports {module} (only `from archwheel.<floor> import NAME`)")
            continue
        public = getattr(importlib.import_module(module), "__all__", ())
        if name not in public:
            bad.append(f"{where} imports {name} from {module}, not in its __all__")
    return bad


def test_command_modules_import_only_public_names_of_the_floors() -> None:
    violations = []
    for path in sorted(COMMANDS_DIR.glob("*.py")):
        if path.name not in EXEMPT:
            violations.extend(public_name_violations(path))
    assert violations == []


def test_checker_sees_a_private_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from archwheel.binary.scan.inputs import scan_path\n"
        "from archwheel.binary import scan_path as ok\n"
        "from archwheel.verdicts import judge_input\n"
        "import archwheel.facts\n"
        "from archwheel.errors import UsageError\n"
        "from archwheel.interfaces.render.common import console\n"
    )
    assert public_name_violations(probe) == [
        "probe.py:1 imports archwheel.binary.scan.inputs (only `from archwheel.<floor> import NAME`)",
        "probe.py:3 imports judge_input from archwheel.verdicts, not in its __all__",
        "probe.py:4 imports archwheel.facts (only `from archwheel.<floor> import NAME`)",
    ]


@pytest.mark.parametrize("package", [*DECLARED, ""])
def test_every_public_name_resolves_lazily(package: str) -> None:
    name = f"archwheel.{package}" if package else "archwheel"
    module = importlib.import_module(name)
    assert module.__file__ is not None
    names = public_names(Path(module.__file__).read_text(encoding="utf-8"))
    assert module.__all__ == sorted(names)
    submodules = {m.name for m in pkgutil.iter_modules(module.__path__)}
    for public, (source, attr, _) in names.items():
        assert public not in submodules, f"{name}.{public} would be shadowed by its submodule"
        assert getattr(module, public) is getattr(importlib.import_module(source), attr)
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError):
        _ = module.no_such_name


def test_the_public_names_are_read_as_python_reads_the_imports() -> None:
    """``_lazy.public_names`` (a few regular expressions, cheap at every start) against the
    abstract syntax tree of each package's imports."""
    for package in ["", *DECLARED]:
        init = PACKAGE / package / "__init__.py"
        source = init.read_text(encoding="utf-8")
        by_ast: dict[str, tuple[str, str]] = {}
        for node in ast.walk(ast.parse(source)):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            if isinstance(node, ast.ImportFrom) and module.startswith("archwheel"):
                by_ast.update({a.asname or a.name: (module, a.name) for a in node.names})
        by_ast.pop("lazy_exports")
        assert {n: (m, a) for n, (m, a, _) in public_names(source).items()} == by_ast, package


def test_public_names_tells_lazy_names_from_those_bound_at_once() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from archwheel._lazy import lazy_exports\n"
        "from archwheel.errors import UsageError\n"
        "if TYPE_CHECKING:\n"
        "    from archwheel.x.y import (\n        a,  # the first\n        b as c,\n    )\n"
        "    from archwheel.z import d\n"
        "__all__, __getattr__, __dir__ = lazy_exports(__name__)\n"
    )
    assert public_names(source) == {
        "UsageError": ("archwheel.errors", "UsageError", False),
        "a": ("archwheel.x.y", "a", True),
        "c": ("archwheel.x.y", "b", True),
        "d": ("archwheel.z", "d", True),
    }


def test_the_help_lines_are_the_command_modules_own() -> None:
    from archwheel.interfaces.cli import build_parser, listing_parser

    def lines(parser: argparse.ArgumentParser) -> dict[str, str | None]:
        (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return {c.dest: c.help for c in action._choices_actions}

    assert lines(build_parser()) == SUMMARY == lines(listing_parser())
    assert [name for name, _, _ in COMMANDS] == list(SUMMARY)


def test_help_texts_state_the_values_of_the_code() -> None:
    """Help that states a constant as text (so that ``--help`` need not import it) states
    the constant's value."""
    from archwheel.effects.engine import ENGINES
    from archwheel.interfaces.commands import manifest, smoke
    from archwheel.interfaces.render.manifest import MAX_MISMATCH_ROWS
    from archwheel.smoke.environments import DEFAULT_INSTALL_TIMEOUT
    from archwheel.smoke.runner import DEFAULT_STEP_TIMEOUT
    from archwheel.verdicts.manifest import MAX_MANIFEST_BYTES
    from archwheel.verdicts.smoke import KERNEL_STEPS

    assert smoke.STEP_TIMEOUT_SHOWN == DEFAULT_STEP_TIMEOUT
    assert smoke.INSTALL_TIMEOUT_SHOWN == DEFAULT_INSTALL_TIMEOUT
    assert ",".join(KERNEL_STEPS) == smoke.KERNEL_STEPS_SHOWN
    assert smoke.ENGINES_SHOWN == ENGINES
    assert f"above the {MAX_MANIFEST_BYTES}\n" in manifest.MANIFEST_EXAMPLES
    assert f"Markdown list {MAX_MISMATCH_ROWS}," in manifest.VERIFY_EXAMPLES


# What a command line that does no work must not import: the console library, the compression
# libraries, plotting, the facts file (and the TOML reader that loads it), the typed documents'
# library, the scanner.
HEAVY = (
    "msgspec",
    "rich",
    "zstandard",
    "lz4",
    "isal",
    "matplotlib",
    "tomllib",
    "archwheel.facts.catalog",
    "archwheel.binary.scan",
)

PROBE = """\
import json, sys
from archwheel.interfaces.cli import main
argv = json.loads(sys.argv[1])
try:
    code = main(argv)
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\\nMODULES " + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def imported_by(argv: list[str]) -> tuple[object, list[str]]:
    """The exit code of ``archwheel ARGV`` in a fresh interpreter, and every module it had
    imported when it ended."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    report = json.loads(proc.stderr.rpartition("\nMODULES ")[2])
    return report["code"], report["modules"]


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["--version"], 0),
        (["audit", "--help"], 0),
        (["can-load", "--help"], 0),
        (["smoke", "--help"], 0),
        (["verify", "--help"], 0),
        (["audit", "--format", "nope"], 2),
        (["nosuch"], 2),
    ],
)
def test_a_command_line_that_does_no_work_imports_nothing_heavy(argv: list[str], code: int) -> None:
    exit_code, modules = imported_by(argv)
    assert exit_code == code
    heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []
    assert "archwheel.interfaces.cli" in modules  # the probe saw the command line run


def test_the_import_probe_sees_a_heavy_import() -> None:
    _, modules = imported_by(["gpus"])  # the GPU table: the facts file (its Structs), rich
    assert "archwheel.facts.catalog" in modules and "rich" in modules and "msgspec" in modules


def test_importing_the_package_or_a_module_imports_no_more_of_it() -> None:
    code = (
        "import sys, json, archwheel, archwheel.binary.elf; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('archwheel'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded = set(json.loads(out))
    assert "archwheel.interfaces.api" not in loaded
    assert "archwheel.binary.scan" not in loaded
    assert not {m for m in loaded if m.startswith(("archwheel.verdicts", "archwheel.inspection"))}


def test_a_json_audit_renders_without_rich(tmp_path: Path) -> None:
    """``audit --format json`` writes its document with the standard library: rich (a table's
    renderer) is imported only for the formats that draw with it (docs/maintainers/performance.md)."""
    from tests.support.builders import Entry, container, elf64, write_zip

    wheel = write_zip(
        tmp_path / "x-1.0-py3-none-any.whl",
        [("x/lib.so", elf64([(".nv_fatbin", container(Entry(sm=90)))]))],
    )
    exit_code, modules = imported_by(["audit", str(wheel), "--format", "json"])
    assert exit_code == 0
    assert "archwheel.binary.scan" in modules  # the audit ran
    assert [m for m in modules if m == "rich" or m.startswith("rich.")] == []
    _, drawn = imported_by(["audit", str(wheel)])
    assert "rich" in drawn  # the probe sees rich where a table is drawn
