"""A project that builds only the CUDA modules named in a switch of its own, whose name setup.py
imports from another file of the project: the plan names the switch, what the recipe sets it
to, and the CUDA sources the selection leaves out, before any compile; the gate lets exactly
those go, still refuses a module that fell back to CPU, and never proposes a pattern that
covers a source the build compiles."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import load_facts
from archwheel.verdicts.module_selection import ModuleSelection, proposed_unbuilt, read_selection
from archwheel.verdicts.source_archs import check_build_files
from archwheel.wheelbuild.compile.nvcc_record import parse_nvcc_record
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.sources.source_check import look_at_source
from archwheel.wheelbuild.wheel.gate import GateVerdict
from archwheel.wheelbuild.wheel.module_gate import ModuleEvidence, check_modules
from tests.support.cli import CliRun
from tests.support.paths import ROOT
from tests.support.torch_pin_support import fake_torch_wheel

MODULES = ("scan", "sort", "topk", "gather", "segment", "hist")
SETUP = (
    "import os\n"
    "from setuptools import setup\n"
    "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
    "from myext._build_names import OPS_ENV\n"
    'ops = os.environ.get(OPS_ENV, "").split(",")\n'
    "ext_modules = []\n"
    + "".join(
        f'if "{m}" in ops:\n'
        f'    ext_modules.append(CUDAExtension("myext._{m}", '
        f'["csrc/{m}/{m}.cpp", "csrc/{m}/{m}_kernel.cu"]))\n'
        for m in MODULES
    )
    + 'if os.getenv("FORCE_CUDA") != "1":\n    ext_modules = []\n'
    'setup(name="myext", version="1.0", ext_modules=ext_modules,\n'
    '      cmdclass={"build_ext": BuildExtension})\n'
)
NAMES = 'OPS_ENV = "MYEXT_OPS"  # the modules to build, comma-separated\n'
FILES = {
    "setup.py": SETUP,
    "myext/__init__.py": "",
    "myext/_build_names.py": NAMES,
    **{f"csrc/{m}/{m}.cpp": "" for m in MODULES},
    **{f"csrc/{m}/{m}_kernel.cu": "" for m in MODULES},
    "csrc/common/reduce.cu": "",  # in no module: the gate still asks for it
}
LEFT_OUT = tuple(sorted(f"csrc/{m}/{m}_kernel.cu" for m in MODULES if m not in ("scan", "sort")))


def _selection(value: str | None) -> ModuleSelection | None:
    check = check_build_files([("setup.py", SETUP)], "TORCH_CUDA_ARCH_LIST", read=FILES.get)
    env = {"MYEXT_OPS": value} if value is not None else {}
    return read_selection("setup.py", SETUP, check.switches, env)


def test_the_switch_maps_each_module_to_its_cuda_sources() -> None:
    selection = _selection("scan,sort")
    assert selection is not None
    assert (selection.switch, selection.where) == ("MYEXT_OPS", "setup.py:5")
    assert list(selection.modules) == list(MODULES)
    assert selection.modules["topk"] == ("csrc/topk/topk_kernel.cu",)
    assert selection.built() == ("csrc/scan/scan_kernel.cu", "csrc/sort/sort_kernel.cu")
    assert selection.left_out() == LEFT_OUT
    label, text = selection.row()
    assert label == "module selection"
    assert text.startswith(
        "MYEXT_OPS (setup.py:5) selects the modules to build (scan, sort, topk, gather, "
        "segment, hist); the recipe sets it to 'scan,sort'; not built, on purpose: "
    )
    assert "(4 CUDA sources; the gate lets them go, as [gate] unbuilt_cuda = [" in text
    # unset, with no default: nothing selected, every module's sources left out
    unset = _selection(None)
    assert unset is not None and len(unset.left_out()) == 6 and "unset" in unset.row()[1]


def test_a_dict_of_sources_taken_in_a_loop_is_read_too() -> None:
    setup = (
        "import os\n"
        'SOURCES = {"a": ["k/a.cpp", "k/a.cu"], "b": ["k/b.cu", "k/shared.cu"],\n'
        '           "c": ["k/c.cu", "k/shared.cu"]}\n'
        'wanted = os.getenv("KOPS", "a").split(";")\n'
        "mods = []\n"
        "for op in wanted:\n"
        '    mods.append(CUDAExtension(f"k._{op}", SOURCES[op]))\n'
    )
    check = check_build_files([("setup.py", setup)], "TORCH_CUDA_ARCH_LIST")
    default = read_selection("setup.py", setup, check.switches, {})
    assert default is not None and default.value == "a" and not default.from_recipe
    chosen = read_selection("setup.py", setup, check.switches, {"KOPS": "b"})
    assert chosen is not None
    # a source a selected module compiles is never left out, whoever else shares it
    assert chosen.left_out() == ("k/a.cu", "k/c.cu")


def test_a_selection_written_otherwise_is_not_guessed() -> None:
    setup = (
        "import os, glob\n"
        'ops = os.environ.get("KOPS", "")\n'
        "mods = [CUDAExtension(o, glob.glob(f'k/{o}/*.cu')) for o in ops.split(',')]\n"
    )
    check = check_build_files([("setup.py", setup)], "TORCH_CUDA_ARCH_LIST")
    assert read_selection("setup.py", setup, check.switches, {"KOPS": "a"}) is None


@pytest.mark.parametrize(
    ("missing", "built", "expected"),
    [
        (["k/a/x.cu", "k/a/y.cu"], ["k/b/z.cu"], ("k/a/*.cu",)),
        # a glob of the folder would cover a compiled source: the files themselves
        (["k/x.cu"], ["k/y.cu"], ("k/x.cu",)),
        # fnmatch's * crosses folders: k/*.cu would also cover k/sub/y.cu
        (["k/x.cu"], ["k/sub/y.cu"], ("k/x.cu",)),
    ],
)
def test_a_proposal_never_covers_a_source_the_build_compiles(
    missing: list[str], built: list[str], expected: tuple[str, ...]
) -> None:
    from fnmatch import fnmatchcase

    proposal = proposed_unbuilt(missing, built)
    assert proposal == expected
    assert not [b for b in built for p in proposal if fnmatchcase(b, p)]
    assert all(any(fnmatchcase(m, p) for p in proposal) for m in missing)


# -- the gate ------------------------------------------------------------------------------------

GOOD = GateVerdict(True, "all 2 libraries with device code hold 9.0")
HEADER = "source file name , phase name , phase input files , phase output file , arch , tool, metric , unit\n"
STABLE = load_recipe(ROOT / "recipes" / "stable-ops.toml", facts=load_facts())


def _record(*sources: str) -> str:
    return HEADER + "".join(
        f"/build/src/{s} , ptxas , /tmp/x.ptx , /tmp/x.cubin , sm_90 , nvcc , 1.0 , ms\n"
        for s in sources
    )


def _evidence(compiled: tuple[str, ...], selection: ModuleSelection | None) -> ModuleEvidence:
    return ModuleEvidence(
        tuple(FILES), "/build/src", parse_nvcc_record(_record(*compiled)), (), (), selection
    )


def test_a_deliberate_selection_passes_and_a_real_fall_back_is_still_refused() -> None:
    selection = _selection("scan,sort")
    asked = ("csrc/scan/scan_kernel.cu", "csrc/sort/sort_kernel.cu", "csrc/common/reduce.cu")
    arch = ArchList.parse("9.0")
    assert check_modules(GOOD, STABLE, arch, _evidence(asked, selection)).ok
    # without the selection read, the same build is a fall-back of four modules
    assert not check_modules(GOOD, STABLE, arch, _evidence(asked, None)).ok
    # sort was asked for and nvcc never compiled it: a module that fell back to CPU
    fell_back = asked[:1] + asked[2:]
    verdict = check_modules(GOOD, STABLE, arch, _evidence(fell_back, selection))
    assert not verdict.ok
    summary = verdict.summary
    assert "never compiled by nvcc (csrc/sort/sort_kernel.cu)" in summary
    assert "1 of them belong to modules MYEXT_OPS (setup.py:5) selects ('scan,sort')" in summary
    assert "leave their modules out of MYEXT_OPS" in summary
    assert "turns CUDA on" not in summary
    proposal = summary.split("[gate] unbuilt_cuda = ")[1]
    # a source the selection asks for is named itself, never by a glob of its folder
    assert proposal == '["csrc/sort/sort_kernel.cu"]'


def test_the_proposal_for_a_folder_shared_with_a_compiled_source_lists_files() -> None:
    files = {**FILES, "csrc/sort/sort_extra.cu": ""}
    selection = _selection("scan,sort")
    compiled = ("csrc/scan/scan_kernel.cu", "csrc/sort/sort_kernel.cu", "csrc/common/reduce.cu")
    evidence = dataclasses.replace(_evidence(compiled, selection), files=tuple(files))
    verdict = check_modules(GOOD, STABLE, ArchList.parse("9.0"), evidence)
    assert not verdict.ok
    assert verdict.summary.endswith('[gate] unbuilt_cuda = ["csrc/sort/sort_extra.cu"]')


# -- the plan, end to end on a real folder (nothing started) ---------------------------------------

RECIPE = """\
schema_version = 1
[recipe]
name = "myext"
[source]
path = "src"
[toolchain]
base_image = "archwheel/debian:bookworm"
source = "pypi"
[python]
versions = ["3.11"]
[arch]
format = "torch"
default = "9.0"
[torch]
version = "2.14.1"
[build]
command = "true"
[build.env]
MYEXT_OPS = "scan,sort"
FORCE_CUDA = "1"
"""


def test_the_plan_names_the_switch_and_what_it_leaves_out(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for relative, text in FILES.items():
        path = tmp_path / "src" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "myext.toml").write_text(RECIPE)
    cache = tmp_path / "cache" / "archwheel" / "torch-wheels"
    cache.mkdir(parents=True)
    fake_torch_wheel(cache, python="cp311")
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    code, out, err = cli_run(
        "build", "--recipe", str(tmp_path / "myext.toml"), "--plan", "--format", "json",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 0, err
    plan = json.loads(out)["plan"]
    switches = plan["project switches"]
    assert switches.startswith(
        "set by the recipe: MYEXT_OPS='scan,sort' (setup.py:5, its name from "
        "myext/_build_names.py:1), FORCE_CUDA='1' (setup.py:"
    )
    assert "not set" not in switches  # both are set: nothing to advise
    assert plan["module selection"].startswith("MYEXT_OPS (setup.py:5) selects the modules")
    for source in LEFT_OUT:
        assert source in plan["module selection"]
    assert "(the 4 MYEXT_OPS leaves out let go)" in plan["gate"]


def test_look_at_source_reads_the_selection_from_the_folder(tmp_path: Path) -> None:
    for relative, text in FILES.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    look = look_at_source(
        tmp_path, tuple(FILES), "TORCH_CUDA_ARCH_LIST", ArchList.parse("9.0"),
        recipe_env={"MYEXT_OPS": "topk"},
    )  # fmt: skip
    assert look.selection is not None and look.selection.built() == ("csrc/topk/topk_kernel.cu",)
    assert ("module selection", look.selection.row()[1]) in look.rows
