"""What the real loader does with a wheel next to a real torch: the truth can-load is checked
against (tests/integration/realwheel/test_can_load.py, tests/integration/docker/
test_extension_can_load.py)."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

from tests.support.cli import CliRun


def really_loads(
    python: Path,
    wheel: Path,
    tmp: Path,
    *,
    separate: bool = False,
    modules: list[str] | None = None,
) -> dict[str, tuple[bool, str]]:
    """`import torch` in a real environment, then open each of the wheel's extension modules
    with RTLD_NOW from an unpacked copy (as Python's import does): member -> (loads, message).

    ``separate``: each module in a process of its own, for wheels whose modules must not share
    one (torch-scatter's ``_scatter_cpu.so`` and ``_scatter_cuda.so`` register the same
    operators: the package loads one of them, and both in one process abort).

    ``modules``: the members to open, for a wheel whose extension modules lie deeper than one
    package folder (deepspeed/ops/adam/fused_adam_op.*.so); by default every ``.so`` at the
    top or in a top-level package folder."""
    site = tmp / wheel.stem
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        # extension modules: in a package folder, or at the top (causal_conv1d_cuda.*.so)
        if modules is None:
            modules = [n for n in zf.namelist() if n.count("/") <= 1 and n.endswith(".so")]
    if separate:
        found: dict[str, tuple[bool, str]] = {}
        for module in modules:
            found.update(_open_modules(python, site, [module]))
        return found
    return _open_modules(python, site, modules)


def _open_modules(python: Path, site: Path, modules: list[str]) -> dict[str, tuple[bool, str]]:
    code = (
        "import ctypes, json, os, sys\nimport torch\nout = {}\n"
        f"for m in {modules!r}:\n"
        f"    try:\n        ctypes.CDLL(os.path.join({str(site)!r}, m), mode=os.RTLD_NOW)\n"
        "        out[m] = [True, '']\n"
        "    except OSError as e:\n        out[m] = [False, str(e)]\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {m: (bool(ok), str(msg)) for m, (ok, msg) in result.items()}


def check_against_import(
    cli_run: CliRun,
    python: Path,
    wheel: Path,
    torch: Path,
    tmp: Path,
    *,
    separate: bool = False,
    modules: list[str] | None = None,
) -> dict[str, object]:
    code, out, err = cli_run("can-load", str(wheel), "--with", str(torch), "--format", "json")
    assert code in (0, 1), out + err
    doc = json.loads(out)
    verdicts = {lib["path"]: lib for lib in doc["libraries"]}
    real = really_loads(python, wheel, tmp, separate=separate, modules=modules)
    assert real
    for module, (ok, message) in real.items():
        lib = verdicts[module]
        assert (lib["verdict"] == "loads") == ok, (module, lib, message)
        if not ok:  # the loader's first complaint is among the verdict's findings
            named = [*lib["missing_libraries"], *(s["name"] for s in lib["missing_symbols"])]
            assert any(n in message for n in named), (message, named)
    return dict(doc)


def package_loads(
    python: Path, wheel: Path, tmp: Path, steps: list[tuple[str, str]], package: str
) -> tuple[dict[str, tuple[bool, str]], tuple[bool, str]]:
    """Load a wheel's libraries the way its package does, next to a real torch: ``steps`` are
    (member, how) in the package's order, how being ``"load_library"`` (``torch.ops.load_library``,
    as torchaudio's ``_load_lib``) or ``"module"`` (an extension module, RTLD_NOW); then a plain
    ``import package`` from the unpacked wheel. Returns member -> (loads, message) and the
    import's (ok, message)."""
    site = tmp / wheel.stem
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    code = (
        "import ctypes, json, os, subprocess, sys\nimport torch\nout = {}\n"
        f"for m, how in {steps!r}:\n"
        f"    path = os.path.join({str(site)!r}, m)\n"
        "    try:\n"
        "        if how == 'load_library':\n            torch.ops.load_library(path)\n"
        "        else:\n            ctypes.CDLL(path, mode=os.RTLD_NOW)\n"
        "        out[m] = [True, '']\n"
        # torch.ops.load_library re-raises the loader's OSError as "Could not load this library"
        "    except OSError as e:\n        out[m] = [False, f'{e} {e.__cause__ or \"\"}']\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    imported = subprocess.run(
        [str(python), "-c", f"import torch, {package}"],
        capture_output=True, text=True, check=False, timeout=600, cwd=site,
    )  # fmt: skip
    return (
        {m: (bool(ok), str(msg)) for m, (ok, msg) in result.items()},
        (imported.returncode == 0, imported.stderr.strip()[-2000:]),
    )


def open_after_torch(
    python: Path, wheel: Path, member: str, tmp: Path, watch: str
) -> tuple[bool, str, list[str]]:
    """`import torch`, then open one member of the unpacked wheel with RTLD_NOW: (opened, the
    loader's message, the files mapped whose name contains ``watch``). A host library in
    ld.so.cache (a CUDA toolkit in /usr/local/cuda) can satisfy what a clean machine lacks: the
    mapped paths show where the loader found it."""
    site = tmp / wheel.stem
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    code = (
        "import ctypes, json, os\nimport torch\n"
        f"try:\n    ctypes.CDLL({str(site / member)!r}, mode=os.RTLD_NOW)\n    ok, msg = True, ''\n"
        "except OSError as e:\n    ok, msg = False, str(e)\n"
        f"maps = sorted({{ln.split()[-1] for ln in open('/proc/self/maps') if {watch!r} in ln}})\n"
        "print(json.dumps([ok, msg, maps]))\n"
    )
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    ok, message, maps = json.loads(proc.stdout.strip().splitlines()[-1])
    return bool(ok), str(message), [str(m) for m in maps]
