"""The repair step inside a real ``archwheel build`` (one build of the example, real Docker).

A copy of the example recipe whose ``[repair]`` also bundles ``libgomp.so.1`` (taken out of the
builder image by archwheel's one-container library step) and asks for the manylinux tag that
the builder's glibc allows (derived here from the symbol versions the wheel's libraries and the
bundled libgomp need, read with archwheel's ELF reader). The gate sees the repaired wheel: the
placed wheel carries libgomp and the RPATHs, its provenance says where libgomp came from, and it
installs into a fresh venv and loads its library with no LD_LIBRARY_PATH.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.binary.debuginfo import strip_view
from archwheel.binary.dynamic_wheel import read_wheel_dynamic
from tests.support.paths import ROOT
from tests.support.venvs import make_venv, pip_install

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
pytestmark = [pytest.mark.docker, pytest.mark.nvcc, pytest.mark.slow]
# One compiler cache for the failing builds below: the second compiles from the cache.
SHARED_CCACHE = f"archwheel-test-ccache-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module", autouse=True)
def _drop_shared_cache() -> Iterator[None]:
    yield
    subprocess.run(
        ["docker", "volume", "rm", "--force", SHARED_CCACHE], capture_output=True, check=False
    )


def newest_glibc(wheel: Path) -> tuple[int, int]:
    newest = (2, 17)
    for info in read_wheel_dynamic(wheel):
        for _file, versions in info.version_needs:
            for v in versions:
                m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", v)
                if m:
                    newest = max(newest, (int(m.group(1)), int(m.group(2))))
    return newest


def test_example_is_repaired_before_the_gate(docker_engine: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    made = subprocess.run(
        [*CLI, "base-image"], env=env, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr[-2000:]
    text = (ROOT / "recipes" / "example.toml").read_text()
    text = text.replace(
        'path = "../examples/cuda-kernels"', f'path = "{ROOT}/examples/cuda-kernels"'
    )
    text = text.replace('platform = "auto"\n', "", 1)  # the tag is named below
    text = text.replace(
        "[repair]\n",
        '[repair]\nbundle = ["libgomp.so.1"]\nlibrary_folder = "archwheel_example"\n'
        # the bookworm builder's glibc is 2.36: any tag it allows is accepted only if
        # auditwheel agrees; 2_36 is the newest such tag, so it must be accepted
        'platform = "manylinux_2_36_x86_64"\n'
        # as auditwheel repair --strip: the builder image's strip, in a container of its own
        'strip = "all"\n',
        1,
    )
    recipe = tmp_path / "example-repair.toml"
    recipe.write_text(text)
    out = tmp_path / "dist"
    volume = f"archwheel-test-ccache-{uuid.uuid4().hex[:8]}"
    try:
        proc = subprocess.run(
            [*CLI, "build", "--recipe", str(recipe), "--arch", "8.0", "--out", str(out),
             "--ccache-volume", volume, "--format", "json"],
            env=env, capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
    finally:
        subprocess.run(
            ["docker", "volume", "rm", "--force", volume], capture_output=True, check=False
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    wheel = Path(result["wheel"])
    assert wheel.name == "archwheel_example-0.1.0-py3-none-manylinux_2_36_x86_64.whl"
    assert sorted(p.name for p in out.glob("*.whl")) == [wheel.name]
    infos = {i.path: i for i in read_wheel_dynamic(wheel)}
    assert infos["archwheel_example/_kernels.so"].rpath == ("$ORIGIN",)
    assert infos["archwheel_example/libgomp.so.1"].soname == "libgomp.so.1"
    assert newest_glibc(wheel) <= (2, 36)
    provenance = json.loads(Path(result["provenance"]).read_text())
    repair = provenance["repair"]
    assert repair["bundled"]["libgomp.so.1"].startswith("/")  # the path inside the image
    assert repair["platform"] == "manylinux_2_36_x86_64"
    assert provenance["wheel"]["file"] == wheel.name
    assert "repair" in provenance["timings_s"]
    stripped = repair["stripped"]["archwheel_example/_kernels.so"]
    assert stripped["after"] < stripped["before"]
    with zipfile.ZipFile(wheel) as zf:
        kernels = Path(zf.extract("archwheel_example/_kernels.so", tmp_path / "members"))
    view = strip_view(kernels)
    assert view is not None and view.symtab_bytes == 0 and view.debug_bytes == 0
    assert "strip archwheel_example/_kernels.so: " in proc.stderr

    python = make_venv(tmp_path / "venv")
    pip_install(python, "--no-index", str(wheel), offline=True)
    clean = {k: v for k, v in env.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    code = (
        "import ctypes, pathlib, archwheel_example as ax;"
        "ctypes.CDLL(str(pathlib.Path(ax.__file__).with_name('_kernels.so')));"
        "print('loaded')"
    )
    loaded = subprocess.run(
        [str(python), "-c", code], env=clean, capture_output=True, text=True, check=False,
        cwd=tmp_path,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert "loaded" in loaded.stdout


@pytest.mark.parametrize(
    ("repair", "message"),
    [
        ('bundle = ["libnothere.so.3"]\nlibrary_folder = "archwheel_example"\n',
         "bundle: libnothere.so.3 was not found"),
        # the builder's glibc is 2.36 and the library needs newer symbols than 2.17's
        ('platform = "manylinux_2_17_x86_64"\n', "auditwheel does not agree"),
    ],
)  # fmt: skip
def test_a_repair_that_fails_places_nothing(
    docker_engine: str, tmp_path: Path, repair: str, message: str
) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    text = (ROOT / "recipes" / "example.toml").read_text()
    text = text.replace(
        'path = "../examples/cuda-kernels"', f'path = "{ROOT}/examples/cuda-kernels"'
    )
    recipe = tmp_path / "example-bad-repair.toml"
    text = text.replace('platform = "auto"\n', "", 1)  # the example's own tag choice
    recipe.write_text(text.replace("[repair]\n", "[repair]\n" + repair, 1))
    out = tmp_path / "dist"
    proc = subprocess.run(
        [*CLI, "build", "--recipe", str(recipe), "--arch", "8.0", "--out", str(out),
         "--ccache-volume", SHARED_CCACHE],
        env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert proc.returncode == 5, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("archwheel: error")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert message in errors[0]
    assert "Traceback" not in proc.stderr
    placed = [p for p in out.rglob("*") if p.is_file() and "logs" not in p.relative_to(out).parts]
    assert placed == []  # no wheel, no provenance, no rejected/ copy: only the build log
