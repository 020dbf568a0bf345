"""Real torch extensions built against torch 2.14.1 (CUDA 13.0) on a real Docker engine.

One session builds each shipped recipe once, for one arch (``9.0``), and every test reads those
wheels (``built``, the session's ``extension_builds`` from tests/support/extension_builds.py): torch-scatter 2.1.2 from its sdist on the package index
(setuptools + CUDAExtension) and archwheel's libtorch example (CMake ``find_package(Torch)``).
The first build makes the torch image (torch and its CUDA toolkit, installed once); the second,
of another extension against the same torch, must reuse it. Every container carries a label
unique to the session, so the tests prove that none was left behind.

Budget on the 2-core CI machine: see docs/building-extensions.md (measured figures).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from tests.support.clean_load import extension_modules, load_everything
from tests.support.containers_support import containers_created, containers_with_label
from tests.support.extension_builds import ARCH, RECIPES, Session, device_images, ok, run_cli
from tests.support.paths import ROOT
from tests.support.venvs import make_venv, pip_install

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.realwheel]

# torch-scatter's compile is 12-20 minutes on 2 cores: its tests run in `nox -s heavy`, not in
# the README's `nox -s tests` (docs/maintainers/performance.md, "CI"); libtorch-ops (about 2 minutes) runs in
# both.
BY_RECIPE = [
    pytest.param(r, marks=pytest.mark.heavy) if r.startswith("torch-scatter") else r
    for r in RECIPES
]


@pytest.fixture
def built(extension_builds: Session) -> Session:
    """The session's extension builds (tests/support/extension_builds.py): each recipe once."""
    return extension_builds


def metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return z.read(name).decode()


# -- what the wheels hold -----------------------------------------------------------------------


@pytest.mark.heavy
def test_torch_scatter_holds_exactly_sm_90_in_every_cuda_module(built: Session) -> None:
    result = ok(built, "torch-scatter-2.1.2")
    images = device_images(result.wheel)
    modules = {Path(p).name for p in images}
    assert {"_scatter_cuda.so", "_segment_csr_cuda.so", "_segment_coo_cuda.so"} <= modules
    assert all(found == {"sm_90"} for found in images.values()), images
    assert result.provenance["audit"]["ok"] is True  # type: ignore[index]


def test_libtorch_example_holds_exactly_sm_90(built: Session) -> None:
    result = ok(built, "libtorch-ops")
    images = device_images(result.wheel)
    assert list(images.values()) == [{"sm_90"}], images
    assert Path(next(iter(images))).name == "_ops.so"


@pytest.mark.parametrize("recipe", BY_RECIPE)
def test_wheel_says_what_it_was_built_against(built: Session, recipe: str) -> None:
    result = ok(built, recipe)
    assert "+pt2.14.1cu130-" in result.wheel.name
    meta = metadata(result.wheel)
    assert "Requires-Dist: torch==2.14.1" in meta.split("\n\n")[0].splitlines()
    assert any(
        line.startswith("Version: ") and line.endswith("+pt2.14.1cu130")
        for line in meta.splitlines()
    )
    torch = result.provenance["torch"]
    assert isinstance(torch, dict)
    assert torch["version"] == "2.14.1+cu130" and torch["cuda"] == "13.0"
    assert torch["toolkit_requirement"].startswith("cuda-toolkit[")
    assert torch["toolkit_requirement"].endswith("]==13.0.3")
    assert result.provenance["toolchain"]["nvcc"].startswith("13.0.")  # type: ignore[index]
    # the load gate: can-load against the torch wheel it was built with
    load = result.provenance["load"]
    assert isinstance(load, dict)
    assert load["verdict"] == "loads" and load["ok"] is True, load
    assert load["torch"] == torch["wheel"]


@pytest.mark.heavy
def test_second_extension_reuses_the_torch_image(built: Session) -> None:
    first = ok(built, RECIPES[0])
    second = ok(built, RECIPES[1])
    one, two = first.provenance["torch"], second.provenance["torch"]
    assert isinstance(one, dict) and isinstance(two, dict)
    assert one["image"] == two["image"] and one["image_id"] == two["image_id"]
    assert two["image_created"] is False
    timings = second.provenance["timings_s"]
    assert isinstance(timings, dict)
    assert timings["torch_image"] < 30, timings  # an image lookup, not a 3 GB install
    print(
        f"torch image: first build {one['image_created']}, timings {first.provenance['timings_s']}"
    )
    print(f"second build timings {timings}")


@pytest.mark.parametrize("recipe", BY_RECIPE)
def test_wheel_installs_into_a_fresh_venv_with_that_torch_and_runs_on_cpu(
    built: Session, recipe: str
) -> None:
    result = ok(built, recipe)
    torch = result.provenance["torch"]
    assert isinstance(torch, dict)
    snippet = result.provenance["smoke"]["snippet"]  # type: ignore[index]
    site = "/opt/archwheel/venv/lib/python3.11/site-packages"
    script = (
        "set -e; python3 -m venv /tmp/v; "
        f"echo {site} > /tmp/v/lib/python3.11/site-packages/torch-image.pth; "
        "/tmp/v/bin/python -m pip install --no-index --no-deps --quiet /wheel/"
        + result.wheel.name
        + "; "
        "/tmp/v/bin/python -m pip check || true; /tmp/v/bin/python /wheel/smoke.py"
    )
    smoke = result.wheel.parent / f".{recipe}-smoke"
    smoke.mkdir(exist_ok=True)
    (smoke / "smoke.py").write_text(str(snippet))
    (smoke / result.wheel.name).write_bytes(result.wheel.read_bytes())
    proc = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--label", built.label.replace("=", "=smoke-", 1),
         "--mount", f"type=bind,source={smoke},target=/wheel,readonly",
         "--entrypoint", "sh", str(torch["image"]), "-c", script],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "correct" in proc.stdout


def test_no_container_is_left(built: Session) -> None:
    assert containers_with_label(["docker"], built.label) == []


# -- bad input ----------------------------------------------------------------------------------


def copy_recipe(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = (ROOT / "recipes" / f"{name}.toml").read_text()
    assert old in text, old
    text = text.replace(old, new).replace("../examples/", str(ROOT / "examples") + "/")
    path = tmp_path / f"{name}-variant.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("old", "new", "args", "message"),
    [
        ('versions = ["3.11"]', 'versions = ["3.9"]', (), "no torch 2.14.1 wheel for Python 3.9"),
        ('cuda = "13.0"\nbase_image', 'cuda = "12.8"\nbase_image', (), "cuda is 12.8"),
        ('version = "2.14.1"', 'version = "2.14.1+cpu"', (), "is a torch without CUDA (cpu)"),
    ],
)
def test_bad_torch_input_fails_before_any_container(
    docker_engine: str, tmp_path: Path, old: str, new: str, args: tuple[str, ...], message: str
) -> None:
    recipe = copy_recipe(tmp_path, "libtorch-ops", old, new)
    if "12.8" in new:
        recipe.write_text(recipe.read_text().replace('source = "pypi"', 'source = "image"'))
    since = time.time()
    label = f"archwheel.test={uuid.uuid4().hex}"
    proc = run_cli(
        {**os.environ, "COLUMNS": "200", "ARCHWHEEL_RUN_LABEL": label},
        "build", "--recipe", str(recipe), "--out", str(tmp_path / "dist"), *args,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert containers_created(["docker"], label, since) == []
    assert not (tmp_path / "dist").exists()


def test_a_build_that_ignores_the_arch_list_is_rejected_naming_the_module(
    built: Session, tmp_path: Path
) -> None:
    ok(built, "libtorch-ops")  # the torch image exists
    recipe = copy_recipe(
        tmp_path,
        "libtorch-ops",
        "python -m pip wheel",
        "TORCH_CUDA_ARCH_LIST=8.0 python -m pip wheel",
    )
    out = tmp_path / "dist"
    proc = run_cli(built.env, "build", "--recipe", str(recipe), "--arch", ARCH, "--out", str(out),
                   "--ccache-volume", built.ccache_volume)  # fmt: skip
    assert proc.returncode == 5, proc.stderr[-3000:]
    assert "failed the audit gate" in proc.stderr
    assert "archwheel_torch_ops/_ops.so lacks sm_90" in proc.stderr
    assert not list(out.glob("*.whl"))  # only rejected/ holds it
    assert len(list((out / "rejected").glob("*.whl"))) == 1
    assert containers_with_label(["docker"], built.label) == []


def test_a_wheel_that_would_not_load_next_to_its_torch_fails_the_build(
    built: Session, tmp_path: Path
) -> None:
    """The module is linked against a library of the build folder that the wheel does not ship
    (an unrepaired wheel): the load gate finds libarchwheel_extra.so nowhere, the build fails with
    one message (exit 5) and nothing reaches the output folder."""
    ok(built, "libtorch-ops")  # the torch image exists
    extra = (
        "printf 'int archwheel_extra(void) { return 1; }\\n' > /build/home/extra.c\n"
        "gcc -shared -fPIC -Wl,-soname,libarchwheel_extra.so -o /build/home/libarchwheel_extra.so "
        "/build/home/extra.c\n"
        # the module's link only (CMake's compiler checks link executables, untouched)
        'export CMAKE_ARGS="-DCMAKE_MODULE_LINKER_FLAGS=-Wl,--no-as-needed,-L/build/home,'
        '-larchwheel_extra"\n'
    )
    recipe = copy_recipe(tmp_path, "libtorch-ops", 'command = """\n', 'command = """\n' + extra)
    # Without [repair] (a recipe may leave it out): the repair step's auditwheel check would
    # refuse the foreign library first; here the load gate is what stands between the wheel
    # and the output folder.
    text = recipe.read_text()
    start, end = text.index("[repair]"), text.index("[smoke]")
    recipe.write_text(text[:start] + text[end:])
    out = tmp_path / "dist"
    proc = run_cli(built.env, "build", "--recipe", str(recipe), "--arch", ARCH, "--out", str(out),
                   "--ccache-volume", built.ccache_volume)  # fmt: skip
    assert proc.returncode == 5, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("archwheel: error")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert "would not load next to the torch it was built against" in errors[0], proc.stderr[-3000:]
    assert "archwheel_torch_ops/_ops.so needs libarchwheel_extra.so" in errors[0]
    assert "Traceback" not in proc.stderr
    # no wheel, no provenance, no rejected/: only the build log (OUT/logs/, as for every build)
    assert [p for p in out.rglob("*") if p.relative_to(out).parts[0] != "logs"] == []
    assert containers_with_label(["docker"], built.label) == []


def test_a_compile_that_runs_out_of_memory_gets_one_message_with_the_fix(
    built: Session, tmp_path: Path
) -> None:
    ok(built, "libtorch-ops")  # the torch image exists
    # A real compiler running out of memory: cc1plus, started through a CMake compiler
    # launcher under an address-space limit far too small for torch's headers, says "virtual
    # memory exhausted" or "out of memory allocating ..." and fails. The launcher runs the
    # compiler itself in place of the one it is handed (archwheel's sccache launcher, whose
    # daemon would compile outside the limit).
    launcher = (
        "printf '#!/bin/sh\\nshift\\nulimit -v 300000\\nexec /usr/bin/c++ \"$@\"\\n'"
        " > /build/home/lowmem\n"
        "chmod +x /build/home/lowmem\n"
        'export CMAKE_ARGS="-DCMAKE_CXX_COMPILER_LAUNCHER=/build/home/lowmem"\n'
    )
    recipe = copy_recipe(tmp_path, "libtorch-ops", 'command = """\n', 'command = """\n' + launcher)
    out = tmp_path / "dist"
    proc = run_cli(built.env, "build", "--recipe", str(recipe), "--arch", ARCH, "--out", str(out),
                   "--no-cache")  # fmt: skip
    assert proc.returncode == 5, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("archwheel: error")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert "ran out of memory with CMAKE_BUILD_PARALLEL_LEVEL=" in errors[0]
    assert "--jobs" in errors[0] and "memory_per_job_gib" in errors[0]
    assert not list(out.rglob("*.whl"))
    assert containers_with_label(["docker"], built.label) == []


def cpu_torch_wheel() -> Path | None:
    """A CPU-only torch wheel in one of the host's pip find-links folders, if there is one."""
    from archwheel.effects.pipconfig import PipSettings, local_folder

    for link in PipSettings.from_host().find_links:
        folder = local_folder(link)
        if folder is not None and folder.is_dir():
            found = sorted(folder.glob("torch-*+cpu-cp311-*.whl"))
            if found:
                return found[-1]
    return None


def test_a_pin_that_resolves_to_a_cpu_torch_is_refused_before_any_container(
    docker_engine: str, tmp_path: Path
) -> None:
    wheel = cpu_torch_wheel()
    if wheel is None:
        pytest.skip("no CPU-only torch wheel in the host's pip find-links folders")
    version = wheel.name.split("-")[1].split("+")[0]
    recipe = copy_recipe(tmp_path, "libtorch-ops", 'version = "2.14.1"', f'version = "{version}"')
    empty = tmp_path / "empty-index"
    empty.mkdir()
    label = f"archwheel.test={uuid.uuid4().hex}"
    since = time.time()
    env = {**os.environ, "COLUMNS": "200", "ARCHWHEEL_RUN_LABEL": label,
           "ARCHWHEEL_CACHE": str(tmp_path / "cache")}  # fmt: skip
    proc = run_cli(
        env, "build", "--recipe", str(recipe), "--out", str(tmp_path / "dist"),
        "--no-host-pip-config", "--index-url", empty.as_uri(), "--find-links", str(wheel.parent),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "which has no CUDA (torch.version.cuda is None)" in proc.stderr
    assert wheel.name in proc.stderr
    assert containers_created(["docker"], label, since) == []
    assert not (tmp_path / "dist").exists()


# -- the repair step: the wheels load on a clean host -------------------------------------------

PACKAGES = {"torch-scatter-2.1.2": "torch_scatter", "libtorch-ops": "archwheel_torch_ops"}


@pytest.mark.parametrize("recipe", BY_RECIPE)
def test_repaired_extension_loads_in_a_fresh_venv_with_only_its_requirements(
    built: Session, tmp_path: Path, recipe: str
) -> None:
    # The repair step ([repair] pins = "official", the 2.14.1/cu130 table): every module gets
    # RPATHs to torch/lib and the nvidia-* folders, the wheel Requires-Dist torch==2.14.1 and
    # the manylinux tag auditwheel agrees to. A fresh venv gets the wheel and whatever its
    # declared requirements pull in (torch and its nvidia-* wheels, from the index pip is
    # configured with); the loader must then resolve every module without LD_LIBRARY_PATH.
    result = ok(built, recipe)
    wheel = result.wheel
    assert wheel.name.endswith("-manylinux_2_36_x86_64.whl"), wheel.name
    repair = result.provenance["repair"]
    assert isinstance(repair, dict) and repair["pins"] == "2.14.1/cu130"
    rpaths = repair["rpaths"]
    assert isinstance(rpaths, dict) and rpaths
    for member, rpath in rpaths.items():
        depth = "../" * member.count("/")
        assert rpath.startswith(f"$ORIGIN/{depth}torch/lib:"), (member, rpath)
        assert f"$ORIGIN/{depth}nvidia/cu13/lib" in rpath, (member, rpath)
    python = make_venv(tmp_path / "venv")
    mark = time.monotonic()
    try:
        pip_install(python, str(wheel))
        print(f"fresh venv with torch and its nvidia-* wheels: {time.monotonic() - mark:.0f} s")
        loaded = load_everything(python, wheel, PACKAGES[recipe], tmp_path)
    finally:  # about 5 GB of torch and nvidia-* wheels: not left for pytest's last 3 runs
        shutil.rmtree(tmp_path / "venv", ignore_errors=True)
    modules = extension_modules(wheel)
    assert modules, wheel.name
    assert loaded == {**dict.fromkeys(modules, "loaded"), f"import {PACKAGES[recipe]}": "loaded"}
