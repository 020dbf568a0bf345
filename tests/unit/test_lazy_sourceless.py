"""A ``.pyc``-only install of archwheel (``compileall -b``, every ``.py`` removed, as some
images ship site-packages): each floor package names the same public names as the source
install and binds every one on use, read from the bytecode (``_lazy.compiled_names``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

FLOORS = (
    "archwheel", "archwheel.effects", "archwheel.facts", "archwheel.binary",
    "archwheel.verdicts", "archwheel.inspection", "archwheel.smoke", "archwheel.doctor",
    "archwheel.crosscheck", "archwheel.housekeeping", "archwheel.wheelbuild", "archwheel.matrix",
)  # fmt: skip

SHOW = """
import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    package = importlib.import_module(name)
    lazy = sorted(n for n in package.__all__ if n not in vars(package))
    values = [getattr(package, n) for n in package.__all__]  # every name binds
    out[name] = {"all": sorted(package.__all__), "lazy": lazy, "bound": len(values),
                 "file": package.__file__}
print(json.dumps(out))
"""


def _names(pythonpath: Path) -> dict[str, dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", SHOW, *FLOORS], env=env, capture_output=True,
                          text=True, check=False, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    shown: dict[str, dict[str, object]] = json.loads(done.stdout)
    return shown


def test_a_pyc_only_install_has_the_same_public_names(tmp_path: Path) -> None:
    copy = tmp_path / "site"
    shutil.copytree(ROOT / "src" / "archwheel", copy / "archwheel",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    subprocess.run([sys.executable, "-m", "compileall", "-b", "-q", str(copy)], check=True)
    for source in copy.rglob("*.py"):
        source.unlink()
    with_source = _names(ROOT / "src")
    without = _names(copy)
    for floor in FLOORS:
        assert str(without[floor]["file"]).endswith(".pyc"), without[floor]
        assert without[floor]["all"] == with_source[floor]["all"], floor
        assert without[floor]["lazy"] == with_source[floor]["lazy"], floor
        assert with_source[floor]["lazy"], floor  # each floor has lazy names to find
