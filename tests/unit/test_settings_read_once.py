"""Settings are read once, at the edge: no module below ``interfaces/`` looks an ``ARCHWHEEL_*``
name up in the environment (``os.environ``, ``os.getenv``, or a mapping passed in place of
it); the interfaces floor makes one ``effects.settings.Settings`` and passes it, or its values,
down (checked on the source, like ``test_layers.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import archwheel

PACKAGE = Path(archwheel.__file__).parent
PREFIX = "ARCHWHEEL_"

# The modules below interfaces/ that may look an ARCHWHEEL_* name up, and why.
ALLOWED_READERS = {
    # The scanner's switch to its pure-Python path, read when the scanner is imported: in the
    # command's process and in each of the scan's worker processes alike, which are started
    # with the environment and no object (binary/scan/pool.py), so it stays where it is read.
    "binary/speedups.py": "ARCHWHEEL_PURE_PYTHON",
    # Standalone scripts copied into the build container and run there by its compilers and
    # setuptools, never imported by archwheel's own process: the plan hands them their values
    # through the container's environment, which is all a script in another process can read.
    "wheelbuild/compile/spread_hook.py": "ARCHWHEEL_SPREAD_EXTENSIONS (in the build container)",
    "wheelbuild/compile/whole_call.py": "ARCHWHEEL_WHOLE_CALL_* (in the build container)",
}

# The modules below interfaces/ that read this process's environment at all, for names that
# are not archwheel's settings (other programs' variables, or the environment a child gets).
ENVIRONMENT_READERS = {
    "effects/process.py": "a child's environment is this process's plus what the caller adds",
    "effects/watchdog.py": "the same, for a step under the watchdog",
    "effects/engine.py": "the environment a held container's engine process starts with",
    "effects/engine_settings.py": "CONTAINERS_CONF: podman's own configuration, when the user set one",
    "effects/pipconfig.py": "pip's own variables (PIP_CERT, REQUESTS_CA_BUNDLE, ...)",
    "wheelbuild/sources/source.py": "PIP_CERT: the certificates the host's pip trusts, for downloads",
    "crosscheck/cuobjdump.py": "PATH, CUDA_HOME, CUDA_PATH: where NVIDIA's cuobjdump may be",
    "binary/speedups.py": "ARCHWHEEL_PURE_PYTHON (see ALLOWED_READERS)",
    "smoke/data/smoke_payload.py": "runs inside the environment under test, not in archwheel",
    "wheelbuild/compile/spread_hook.py": "runs inside the build container (see ALLOWED_READERS)",
    "wheelbuild/compile/whole_call.py": "runs inside the build container (see ALLOWED_READERS)",
}


def _below_interfaces() -> list[Path]:
    return sorted(
        p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "interfaces"
    )


def _archwheel_constants() -> set[str]:
    """The module-level names whose value is an ``ARCHWHEEL_*`` string (``KEEP_ENV``, ...)."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                and node.value.value.startswith(PREFIX)
            ):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _is_setting(node: ast.AST, constants: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith(PREFIX)
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Attribute):  # module.KEEP_ENV
        return node.attr in constants
    return False


def lookups(tree: ast.AST, constants: set[str]) -> list[int]:
    """The lines that look an ``ARCHWHEEL_*`` name up in a mapping: ``m.get(NAME)``,
    ``m.pop(NAME)``, ``os.getenv(NAME)``, ``m[NAME]`` (read), ``NAME in m``."""
    found = []
    for node in ast.walk(tree):
        key: ast.AST | None = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in ("get", "pop", "setdefault", "getenv"):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.In, ast.NotIn)) for op in node.ops
        ):
            key = node.left
        if key is not None and _is_setting(key, constants):
            found.append(getattr(node, "lineno", 0))
    return found


_ENVIRONMENT = ("environ", "getenv", "environb")


def _reads_environment(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in _ENVIRONMENT
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in _ENVIRONMENT for a in node.names)
        ):
            return True
    return False


def test_no_module_below_interfaces_reads_an_archwheel_setting() -> None:
    constants = _archwheel_constants()
    assert {"KEEP_ENV", "MIRROR_ENV", "CACHE_URL_ENV"} <= constants  # the check sees them
    bad: list[str] = []
    for path in _below_interfaces():
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in ALLOWED_READERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bad.extend(f"{relative}:{line}" for line in lookups(tree, constants))
    assert not bad, (
        "ARCHWHEEL_* looked up below interfaces/ (take effects.settings.Settings, or its "
        f"value, as a parameter): {bad}"
    )


def test_only_the_listed_modules_below_interfaces_read_the_environment() -> None:
    readers = {
        path.relative_to(PACKAGE).as_posix()
        for path in _below_interfaces()
        if _reads_environment(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert readers <= set(ENVIRONMENT_READERS), sorted(readers - set(ENVIRONMENT_READERS))
    assert readers == set(ENVIRONMENT_READERS), sorted(set(ENVIRONMENT_READERS) - readers)


def test_the_allowed_reader_is_the_only_one_of_its_kind() -> None:
    """The exception is real (the check would see it), and settings.py reads no name alone."""
    constants = _archwheel_constants()
    for relative in ALLOWED_READERS:
        tree = ast.parse((PACKAGE / relative).read_text(encoding="utf-8"))
        assert lookups(tree, constants), relative


def test_the_check_sees_each_kind_of_lookup() -> None:
    source = """
import os
A = os.environ.get("ARCHWHEEL_X")
B = environ["ARCHWHEEL_Y"]
C = os.getenv(MIRROR_ENV)
D = "ARCHWHEEL_Z" in env
env["ARCHWHEEL_SET"] = "1"  # setting a child's variable is not reading one
"""
    assert lookups(ast.parse(source), {"MIRROR_ENV"}) == [3, 4, 5, 6]
