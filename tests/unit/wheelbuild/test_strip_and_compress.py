"""Smaller extension wheels by default: the repair step strips debug sections
(``[repair] strip``) on real modules compiled here with ``-g`` as distutils compiles them, and an
extension's nvcc compresses its fatbins (``[build] compress_fatbins``) unless the recipe chose."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from archwheel.binary.debuginfo import strip_view
from archwheel.binary.scan.inputs import scan_path
from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import RecipeError
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.interfaces.render.build import plan_json
from archwheel.verdicts.audit import audit, audit_document
from archwheel.wheelbuild.compile.compression import choose_compression
from archwheel.wheelbuild.compile.jobs import GIB, HostResources, choose_jobs
from archwheel.wheelbuild.compile.nvcc_record import TIME_FLAG
from archwheel.wheelbuild.planning.plan import (
    BuildOptions,
    BuildPlan,
    check_arch_list,
    make_plan,
)
from archwheel.wheelbuild.planning.plan_variants import serial_variant
from archwheel.wheelbuild.recipes.recipe import load_recipe, parse_recipe
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.sources.source import ResolvedSource
from archwheel.wheelbuild.wheel.repair import RepairError, RepairSpec, repair_wheel, spec_for_recipe
from tests.support.builders import Entry, container
from tests.support.components import require
from tests.support.paths import ROOT
from tests.support.repair_wheels import write_wheel

FACTS = load_facts()
MODULE_C = r"""
#include <Python.h>
static int table[4096];
static PyObject* value(PyObject* self, PyObject* args) {
    long total = 0;
    for (int i = 0; i < 4096; ++i) total += table[i] + i;
    return PyLong_FromLong(total);
}
static PyMethodDef methods[] = {{"value", value, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dbg", NULL, -1, methods};
PyMODINIT_FUNC PyInit__dbg(void) { return PyModule_Create(&module); }
"""
EXPECTED = sum(range(4096))


@pytest.fixture(scope="module")
def debug_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel whose module was compiled as distutils compiles one: with ``-g``."""
    require(shutil.which("gcc") is not None, "gcc is not installed")
    folder = tmp_path_factory.mktemp("debug-wheel")
    (folder / "m.c").write_text(MODULE_C)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    module = folder / f"_dbg{suffix}"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-g", "-O2", f"-I{include}", "-o", str(module),
         str(folder / "m.c")],
        check=True, capture_output=True,
    )  # fmt: skip
    py = f"cp{sysconfig.get_python_version().replace('.', '')}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return write_wheel(
        folder / f"dbg-1.0-{py}-{py}-{plat}.whl",
        {"dbg/__init__.py": b"", f"dbg/_dbg{suffix}": module},
        "dbg",
        f"{py}-{py}-{plat}",
    )


def module_member(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return next(n for n in zf.namelist() if n.endswith(".so"))


def imports(wheel: Path, where: Path) -> int:
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(where)
    done = subprocess.run(
        [sys.executable, "-c", "import dbg._dbg as m; print(m.value())"],
        cwd=where, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return int(done.stdout)


# -- what strip would remove ------------------------------------------------------------------


def test_strip_view_sees_debug_sections_and_the_symbol_table(
    debug_wheel: Path, tmp_path: Path
) -> None:
    with zipfile.ZipFile(debug_wheel) as zf:
        path = Path(zf.extract(module_member(debug_wheel), tmp_path))
    view = strip_view(path)
    assert view is not None and view.size == path.stat().st_size
    assert view.debug_bytes > 0 and view.symtab_bytes > 0
    readelf = subprocess.run(
        ["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=True
    ).stdout
    assert ".debug_info" in readelf  # the reference tool agrees there is debug info
    subprocess.run(["strip", "--strip-debug", str(path)], check=True)
    after = strip_view(path)
    assert after is not None and after.debug_bytes == 0 and after.symtab_bytes > 0
    subprocess.run(["strip", "--strip-all", str(path)], check=True)
    final = strip_view(path)
    assert final is not None and final.symtab_bytes == 0


def test_strip_view_refuses_what_is_no_elf_file(tmp_path: Path) -> None:
    text = tmp_path / "x.so"
    text.write_bytes(b"not an ELF file at all")
    assert strip_view(text) is None
    truncated = tmp_path / "t.so"
    truncated.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x03\x00>\x00" + b"\xff" * 40)
    assert strip_view(truncated) is None  # a section table past the end: None, no exception


# -- the repair step strips --------------------------------------------------------------------


def test_the_repair_strips_debug_sections_and_the_module_still_imports(
    debug_wheel: Path, tmp_path: Path
) -> None:
    require(shutil.which("strip") is not None, "binutils is not installed")
    before = imports(debug_wheel, tmp_path / "before")
    report = repair_wheel(debug_wheel, tmp_path / "out", RepairSpec("t: [repair]", strip="debug"))
    member = module_member(debug_wheel)
    done = report.stripped[member]
    assert done.after < done.before and done.debug_bytes > 0
    assert done.before - done.after >= done.debug_bytes // 2
    with zipfile.ZipFile(report.wheel) as zf:
        size = zf.getinfo(member).file_size
        path = Path(zf.extract(member, tmp_path / "x"))
    assert size < done.before  # patchelf then adds its RPATH to the stripped file
    view = strip_view(path)
    assert view is not None and view.debug_bytes == 0 and view.symtab_bytes > 0
    assert imports(report.wheel, tmp_path / "after") == before == EXPECTED
    assert report.to_json_dict()["stripped"] == {member: done.to_json_dict()}


def test_strip_all_as_auditwheel_and_none(debug_wheel: Path, tmp_path: Path) -> None:
    report = repair_wheel(debug_wheel, tmp_path / "all", RepairSpec("t", strip="all"))
    member = module_member(debug_wheel)
    with zipfile.ZipFile(report.wheel) as zf:
        view = strip_view(Path(zf.extract(member, tmp_path / "a")))
    assert view is not None and view.symtab_bytes == 0
    assert imports(report.wheel, tmp_path / "all-import") == EXPECTED
    kept = repair_wheel(debug_wheel, tmp_path / "none", RepairSpec("t", strip="none"))
    assert dict(kept.stripped) == {}
    with zipfile.ZipFile(kept.wheel) as zf, zipfile.ZipFile(debug_wheel) as original:
        assert zf.getinfo(member).file_size > original.getinfo(member).file_size // 2


def test_a_stripper_that_leaves_debug_sections_fails_the_repair(
    debug_wheel: Path, tmp_path: Path
) -> None:
    calls: list[tuple[str, int]] = []

    def lazy(flag: str, files: Sequence[Path]) -> None:
        calls.append((flag, len(files)))

    with pytest.raises(RepairError, match="unstripped"):
        repair_wheel(debug_wheel, tmp_path / "o", RepairSpec("t", strip="debug"), stripper=lazy)
    assert calls == [("--strip-debug", 1)]
    assert not list((tmp_path / "o").rglob("*.whl"))  # nothing written


def test_a_module_without_debug_sections_is_not_stripped(debug_wheel: Path, tmp_path: Path) -> None:
    first = repair_wheel(debug_wheel, tmp_path / "1", RepairSpec("t", strip="debug"))
    called: list[str] = []
    second = repair_wheel(
        first.wheel, tmp_path / "2", RepairSpec("t", strip="debug"),
        stripper=lambda flag, files: called.append(flag),
    )  # fmt: skip
    assert called == [] and dict(second.stripped) == {}


# -- the recipe ---------------------------------------------------------------------------------

RECIPE = {
    "schema_version": 1,
    "recipe": {"kind": "extension", "version": "0.1"},
    "source": {"path": "."},
    "toolchain": {"cuda": "13.0", "base_image": "archwheel/debian:bookworm", "source": "pypi"},
    "arch": {"default": "9.0"},
    "build": {"command": "true"},
    "repair": {},
}


@pytest.mark.parametrize(
    ("kind", "value", "mode"),
    [
        ("extension", None, "debug"),  # the default of an extension: as torch's own libraries
        ("extension", True, "debug"),
        ("extension", "all", "all"),
        ("extension", False, "none"),
        ("pytorch", None, "none"),
        ("pytorch", True, "debug"),
    ],
)
def test_strip_from_the_recipe(tmp_path: Path, kind: str, value: object, mode: str) -> None:
    data: dict[str, object] = {**RECIPE, "recipe": {"kind": kind, "version": "2.14.1"}}
    if value is not None:
        data["repair"] = {"strip": value}
    spec = spec_for_recipe(parse_recipe(data, origin=tmp_path / "r.toml", facts=FACTS))
    assert spec is not None and spec.strip == mode
    assert ("strip --strip" in spec.describe()) is (mode != "none")
    assert spec.to_json_dict()["strip"] == mode


@pytest.mark.parametrize("value", ["yes", 1, "debug"])
def test_a_bad_strip_value_is_refused(tmp_path: Path, value: object) -> None:
    with pytest.raises(RecipeError, match=r'strip must be true \(debug sections\), "all"') as e:
        parse_recipe(
            {**RECIPE, "repair": {"strip": value}}, origin=tmp_path / "r.toml", facts=FACTS
        )
    assert "\n" not in str(e.value)


# -- compressed fatbins -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cuda", "env", "enabled", "flags", "why"),
    [
        ("13.0", {}, True, "-Xfatbin -compress-all -compress-mode=size", "official torch"),
        ("12.8", {}, True, "-Xfatbin -compress-all", "official torch"),
        ("12.1", {}, True, "", "predates -compress-all"),
        ("13.0", {"NVCC_FLAGS": "-Xfatbin -compress-all"}, True, "", "own choice (NVCC_FLAGS)"),
        ("13.0", {"X": "-Xfatbin -no-compress"}, True, "", "own choice (X)"),
        ("13.0", {}, False, "", "compress_fatbins = false"),
        ("13.0", {}, "speed", "-Xfatbin -compress-all -compress-mode=speed", "= 'speed'"),
        ("13.0", {}, "balance", "-Xfatbin -compress-all -compress-mode=balance", "'balance'"),
        ("13.0", {}, "none", "-compress-mode=none", "nothing compressed, PTX too"),
        ("13.0", {"F": "-compress-mode=speed"}, "size", "", "own choice (F)"),
        ("12.1", {}, "size", "", "predates -compress-all"),
    ],
)
def test_compression_choice(
    cuda: str, env: dict[str, str], enabled: bool | str, flags: str, why: str
) -> None:
    chosen = choose_compression(CudaVersion.parse(cuda), env, enabled=enabled)
    assert chosen.flags == flags and why in chosen.why


def plan_for(recipe: Recipe, arch: str = "8.0;9.0") -> BuildPlan:
    source = ResolvedSource(
        spec=recipe.source, root=Path("/checkout/src"), commit="", dirty=False,
        content_sha256="d" * 64, files=("setup.py",), source_date_epoch=1_700_000_000,
        epoch_origin="test",
    )  # fmt: skip
    jobs = choose_jobs(HostResources(cpus=2, memory_bytes=20 * GIB), 2.0)
    return make_plan(
        recipe, check_arch_list(recipe, arch, facts=FACTS), BuildOptions(out=Path("/out")),
        source, jobs=jobs, pip=PipSettings(), user=(1234, 567), ninja_off=(),
    )  # fmt: skip


def compile_env(plan: BuildPlan) -> dict[str, str]:
    return next(dict(s.env) for p in plan.phases for s in p.steps if s.name == "compile")


def scatter_without_its_flags(tmp_path: Path, extra: str = "") -> Recipe:
    text = (ROOT / "recipes" / "torch-scatter-2.1.2.toml").read_text()
    text = text.replace('NVCC_FLAGS = "-Xfatbin -compress-all"\n', "")
    text = text.replace("[build.env]", f"{extra}[build.env]")
    path = tmp_path / "torch-scatter-2.1.2.toml"
    path.write_text(text)
    return load_recipe(path, facts=FACTS)


def test_an_extension_without_its_own_choice_compresses(tmp_path: Path) -> None:
    plan = plan_for(scatter_without_its_flags(tmp_path))
    env = compile_env(plan)
    assert env["NVCC_APPEND_FLAGS"] == (
        f"-Xfatbin -compress-all -compress-mode=size {TIME_FLAG} --threads 2"
    )
    assert plan.compression is not None and plan.compression.flags
    assert "fatbins" in dict(plan.summary_rows())
    assert plan_json(plan)["fatbins"]["flags"] == plan.compression.flags  # type: ignore[index]
    # the reproducibility check's serial build keeps the compression, drops only --threads
    serial = compile_env(serial_variant(plan))
    assert serial["NVCC_APPEND_FLAGS"] == f"-Xfatbin -compress-all -compress-mode=size {TIME_FLAG}"


def test_the_recipes_own_choice_and_the_switch(tmp_path: Path) -> None:
    shipped = plan_for(load_recipe(ROOT / "recipes" / "torch-scatter-2.1.2.toml", facts=FACTS))
    assert compile_env(shipped)["NVCC_APPEND_FLAGS"] == f"{TIME_FLAG} --threads 2"
    assert shipped.compression is not None and "NVCC_FLAGS" in shipped.compression.why
    off = plan_for(scatter_without_its_flags(tmp_path, "compress_fatbins = false\n"), arch="9.0")
    assert compile_env(off)["NVCC_APPEND_FLAGS"] == TIME_FLAG  # the record only
    pytorch = load_recipe(ROOT / "recipes" / "pytorch-2.14.1-cu130.toml", facts=FACTS)
    assert plan_for(pytorch, arch="9.0").compression is None  # torch's own TORCH_NVCC_FLAGS


def test_compress_fatbins_must_be_a_flag_or_a_mode(tmp_path: Path) -> None:
    for bad in ('"yes"', '"fast"', "1", '"SIZE"'):
        with pytest.raises(RecipeError, match="compress_fatbins must be true, false or a -co"):
            scatter_without_its_flags(tmp_path, f"compress_fatbins = {bad}\n")


def test_a_named_mode_reaches_nvcc_and_the_plan(tmp_path: Path) -> None:
    plan = plan_for(scatter_without_its_flags(tmp_path, 'compress_fatbins = "speed"\n'))
    assert compile_env(plan)["NVCC_APPEND_FLAGS"] == (
        f"-Xfatbin -compress-all -compress-mode=speed {TIME_FLAG} --threads 2"
    )
    assert "compress_fatbins = 'speed'" in dict(plan.summary_rows())["fatbins"]


def test_a_named_mode_before_cuda_13_is_refused_in_one_line() -> None:
    with pytest.raises(RecipeError) as e:
        choose_compression(CudaVersion.parse("12.8"), {}, enabled="size")
    assert "needs nvcc's -compress-mode" in e.value.one_line()
    assert "\n" not in e.value.one_line()


def test_the_audit_reports_what_strip_would_save_and_then_saved(
    debug_wheel: Path, tmp_path: Path
) -> None:
    """The audit's size report: each library's debug-section bytes, as the
    repair's own reader (debuginfo.strip_view) counts them, and none once stripped."""
    require(shutil.which("strip") is not None, "binutils is not installed")
    member = module_member(debug_wheel)
    with zipfile.ZipFile(debug_wheel) as zf:
        view = strip_view(Path(zf.extract(member, tmp_path / "x")))
    assert view is not None and view.debug_bytes > 0
    (library,) = [lib for lib in scan_path(debug_wheel).libraries if lib.path == member]
    assert library.debug_bytes == view.debug_bytes
    # with device code (a fatbin section added), the audit JSON lists it with its debug bytes
    fatbin = tmp_path / "k.fatbin"
    fatbin.write_bytes(container(Entry(sm=90)))
    module = tmp_path / "module.so"
    subprocess.run(
        ["objcopy", "--add-section", f".nv_fatbin={fatbin}", str(tmp_path / "x" / member),
         str(module)], check=True, capture_output=True,
    )  # fmt: skip
    document = audit_document([audit(scan_path(module), None)])
    (row,) = document["inputs"][0]["libraries"]
    assert row["debug_bytes"] == view.debug_bytes
    report = repair_wheel(debug_wheel, tmp_path / "out", RepairSpec("t: [repair]", strip="debug"))
    (stripped,) = [lib for lib in scan_path(report.wheel).libraries if lib.path == member]
    assert stripped.debug_bytes == 0
