"""cuobjdump as an oracle on the nvcc fixture corpus, whose contents are derived from the nvcc
flags: what it lists of each fixture and what it cannot see, and archwheel's layout reader
against ``readelf -SW`` and ``ar t`` (see docs/maintainers/fixtures.md).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from archwheel.binary.cuobjdump import read_layout
from archwheel.crosscheck.cuobjdump import Cuobjdump, ensure_cuobjdump
from archwheel.effects.settings import Settings
from archwheel.errors import ToolError
from archwheel.facts.arch import CodeKind, Target, Variant
from tests.support.cuobjdump_support import NV, REL
from tests.support.nvcc_fixtures import SPECS, NvccCorpus, Product

SASS = CodeKind.SASS


# -- read_layout (its own ELF and ar readers, checked against binutils) ---------------------------


def readelf_sections(path: Path) -> set[str]:
    command = ["readelf", "-SW", str(path)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"^\s*\[\s*\d+\]\s+(\S+)", out, re.MULTILINE)) - {"NULL"}


@pytest.mark.nvcc
@pytest.mark.parametrize("name", [s.name for s in SPECS if s.product is not Product.STATIC])
def test_read_layout_finds_the_same_section_names_as_readelf(
    nvcc_corpus: NvccCorpus, name: str
) -> None:
    fixture = nvcc_corpus[name]
    layout = read_layout(fixture.path)
    if fixture.spec.product is Product.CUBIN:
        assert layout.kind == "cubin"
    elif fixture.spec.product is Product.FATBIN:
        assert layout.kind == "fatbin"
    else:
        assert layout.kind == "host-elf"
        assert layout.sections == readelf_sections(fixture.path)


@pytest.mark.nvcc
def test_read_layout_lists_archive_members_like_ar(nvcc_corpus: NvccCorpus) -> None:
    archive = nvcc_corpus["libkernels.a"].path
    layout = read_layout(archive)
    command = ["ar", "t", str(archive)]
    members = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert layout.kind == "archive"
    assert layout.members is not None
    assert set(layout.members) == set(members.split())
    assert REL in layout.members["reduce.o"]
    assert NV in layout.members["scale.o"]


@pytest.mark.nvcc
def test_read_layout_reads_gnu_long_member_names(tmp_path: Path, nvcc_corpus: NvccCorpus) -> None:
    long_name = "a_member_with_a_name_longer_than_sixteen.o"
    (tmp_path / long_name).write_bytes(nvcc_corpus["relocatable.o"].path.read_bytes())
    subprocess.run(["ar", "rcs", "liblong.a", long_name], cwd=tmp_path, check=True)
    layout = read_layout(tmp_path / "liblong.a")
    assert layout.members == {long_name: frozenset(readelf_sections(tmp_path / long_name))}


# -- running cuobjdump on the nvcc corpus ---------------------------------------------------------


def cuobjdump_view_of_flags(name: str) -> dict[str | None, Counter[tuple[str, CodeKind, str]]]:
    """What cuobjdump must list, per member, from the flags and its documented blind spots."""
    spec = next(s for s in SPECS if s.name == name)
    from tests.support.nvcc_fixtures import expected_images

    view: dict[str | None, Counter[tuple[str, CodeKind, str]]] = {}
    for image in expected_images(spec):
        if image.kind is CodeKind.LTOIR or image.section not in ("(fatbin)", "(cubin)", NV, REL):
            continue  # not listed by cuobjdump
        kind, target = Target.from_name(image.arch)
        if kind is SASS and target.variant is Variant.FAMILY_SPECIFIC:
            target = Target(target.cc)  # cuobjdump prints sm_103f as sm_103
        key = (image.section, kind, target.name(kind))
        view.setdefault(image.member, Counter())[key] += image.count
    return view


@pytest.mark.nvcc
@pytest.mark.parametrize("name", [s.name for s in SPECS])
def test_cuobjdump_lists_what_the_nvcc_flags_put_in_each_fixture(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, name: str
) -> None:
    seen = cuobjdump.inventory(nvcc_corpus[name].path)
    got = {member: counts for member, counts in seen.counts.items() if counts}
    assert got == cuobjdump_view_of_flags(name)


@pytest.mark.nvcc
def test_cuobjdump_drops_the_f_of_family_cubins_but_not_of_family_ptx(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump
) -> None:
    listed_archs = {
        i.arch for i in cuobjdump.list_images(nvcc_corpus["variants.so"].path, all_fatbins=True)
    }
    assert {"sm_100", "sm_103", "sm_120", "compute_120f", "sm_90a", "compute_90a"} <= listed_archs
    assert not {"sm_100f", "sm_103f", "sm_120f"} & listed_archs


@pytest.mark.nvcc
def test_cuobjdump_without_all_skips_the_relocatable_fatbin(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump
) -> None:
    path = nvcc_corpus["device_linked.so"].path
    every = cuobjdump.list_images(path, all_fatbins=True)
    default = cuobjdump.list_images(path, all_fatbins=False)
    assert len(default) == 2  # the device-link cubins, sm_80 and sm_90
    assert len(every) == 6  # plus two translation units x two archs in __nv_relfatbin


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["embedded_incbin.so", "embedded_objcopy.so"])
def test_cuobjdump_cannot_see_a_fatbin_outside_its_two_sections(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, name: str
) -> None:
    assert cuobjdump.list_images(nvcc_corpus[name].path, all_fatbins=True) == ()


@pytest.mark.nvcc
def test_a_fatbin_whose_size_points_past_its_section_is_a_tool_error(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    data = bytearray(nvcc_corpus["multi_arch.so"].path.read_bytes())
    container = data.find(bytes.fromhex("50ed55ba"))
    data[container + 8 : container + 16] = (1 << 40).to_bytes(8, "little")
    broken = tmp_path / "broken.so"
    broken.write_bytes(bytes(data))
    with pytest.raises(ToolError, match="Invalid fatbin header") as info:
        cuobjdump.inventory(broken)
    assert "\n" not in info.value.one_line()


@pytest.mark.slow
@pytest.mark.nvcc
def test_install_on_demand_puts_a_working_cuobjdump_in_the_cache_once(
    tmp_path: Path, nvcc_corpus: NvccCorpus
) -> None:
    env = {"PATH": "", "ARCHWHEEL_CACHE": str(tmp_path / "cache")}
    original = sys.path[:]
    try:
        sys.path[:] = []  # hide the cuobjdump of this environment
        tool = ensure_cuobjdump(Settings.from_environ(env), install=True, environ=env)
        again = ensure_cuobjdump(Settings.from_environ(env), install=True, environ=env)
    finally:
        sys.path[:] = original
    assert tool.executable.is_relative_to(tmp_path / "cache" / "archwheel" / "cuobjdump" / "venv")
    assert again.executable == tool.executable
    assert tool.version().startswith("13.")
    seen = tool.inventory(nvcc_corpus["multi_arch.so"].path)
    assert seen.total == sum(cuobjdump_view_of_flags("multi_arch.so")[None].values())
