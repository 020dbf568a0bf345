"""cuobjdump as an oracle: its listing parser, section attribution, layout reader and runner.

The listing samples below are cuobjdump 13.5's real output (see docs/fixtures.md for the
commands). The runner is checked against the nvcc fixture corpus, whose contents are derived
from the nvcc flags, and against facts about the torch 2.14.1 wheel (cuda-facts.md section 6).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from archwheel.binary.cuobjdump import (
    Cuobjdump,
    CuobjdumpInstaller,
    ListedImage,
    cache_dir,
    ensure_cuobjdump,
    find_cuobjdump,
    parse_listing,
    read_layout,
    split_by_section,
)
from archwheel.errors import ToolError
from archwheel.facts.arch import CodeKind, Target, Variant
from tests.nvcc_fixtures import SPECS, NvccCorpus, Product

SASS, PTX = CodeKind.SASS, CodeKind.PTX
NV, REL = ".nv_fatbin", "__nv_relfatbin"

# -- parse_listing --------------------------------------------------------------------------------

NVSHMEM_DEFAULT = """\
ELF file    1: libtorch_nvshmem.1.sm_75.cubin
ELF file    2: libtorch_nvshmem.2.sm_80.cubin
ELF file    3: libtorch_nvshmem.3.sm_86.cubin
"""

ARCHIVE = """
member /tmp/orx/libk.a:k.o:
ELF file    1: libk.1.sm_75.cubin
ELF file    2: libk.2.sm_90a.cubin

member /tmp/orx/libk.a:k2.o:
PTX file    1: libk.1.sm_80.ptx
ELF file    3: libk.3.sm_80.cubin
"""


def test_parse_listing_reads_elf_and_ptx_lines_in_archwheel_spelling() -> None:
    text = NVSHMEM_DEFAULT + "PTX file    1: libtorch_nvshmem.1.sm_120.ptx\n"
    assert parse_listing(text) == (
        ListedImage(SASS, "sm_75", "libtorch_nvshmem.1.sm_75.cubin"),
        ListedImage(SASS, "sm_80", "libtorch_nvshmem.2.sm_80.cubin"),
        ListedImage(SASS, "sm_86", "libtorch_nvshmem.3.sm_86.cubin"),
        ListedImage(PTX, "compute_120", "libtorch_nvshmem.1.sm_120.ptx"),
    )


def test_parse_listing_keeps_a_and_f_where_cuobjdump_prints_them() -> None:
    text = (
        "ELF file    1: var.1.sm_90a.cubin\n"
        "PTX file    1: var.1.sm_90a.ptx\n"
        "PTX file    2: var.2.sm_120f.ptx\n"
        "ELF file   10: var.10.sm_120.cubin\n"
    )
    assert [i.arch for i in parse_listing(text)] == [
        "sm_90a",
        "compute_90a",
        "compute_120f",
        "sm_120",
    ]


def test_parse_listing_attributes_archive_members() -> None:
    images = parse_listing(ARCHIVE)
    assert [(i.member, i.kind, i.arch) for i in images] == [
        ("k.o", SASS, "sm_75"),
        ("k.o", SASS, "sm_90a"),
        ("k2.o", PTX, "compute_80"),
        ("k2.o", SASS, "sm_80"),
    ]


def test_parse_listing_reads_a_bare_cubin_line_without_index_and_odd_names() -> None:
    assert parse_listing("ELF file    1: k.sm_90.cubin\n")[0].arch == "sm_90"
    odd = "ELF file    7: my lib (copy).so.7.sm_100a.cubin\n"
    assert parse_listing(odd) == (ListedImage(SASS, "sm_100a", "my lib (copy).so.7.sm_100a.cubin"),)


def test_parse_listing_of_nothing_is_empty() -> None:
    assert parse_listing("") == ()
    assert parse_listing("\n\n") == ()


@pytest.mark.parametrize(
    "line",
    [
        "NVVM file    1: x.1.sm_90.nvvm",
        "ELF file    1: x.1.cubin",
        "ELF file    1: x.1.sm_90.bin",
        "Fatbin elf code:",
    ],
)
def test_parse_listing_refuses_lines_it_does_not_understand(line: str) -> None:
    with pytest.raises(ToolError, match="unexpected line in cuobjdump output"):
        parse_listing(NVSHMEM_DEFAULT + line + "\n")


# -- split_by_section -----------------------------------------------------------------------------


def listed(*pairs: tuple[CodeKind, str]) -> list[ListedImage]:
    return [ListedImage(kind, arch, f"x.{n}.{arch}") for n, (kind, arch) in enumerate(pairs)]


def test_split_attributes_the_difference_between_the_two_runs_to_relfatbin() -> None:
    every = listed((SASS, "sm_75"), (SASS, "sm_80"), (SASS, "sm_75"), (PTX, "compute_120"))
    default = listed((SASS, "sm_75"), (SASS, "sm_80"))
    counts = split_by_section(every, default, frozenset({NV, REL, ".text"}))
    assert counts == Counter(
        {(NV, SASS, "sm_75"): 1, (NV, SASS, "sm_80"): 1, (REL, SASS, "sm_75"): 1,
         (REL, PTX, "compute_120"): 1}
    )  # fmt: skip


@pytest.mark.parametrize("section", [NV, REL])
def test_split_with_one_fatbin_section_puts_everything_there(section: str) -> None:
    every = listed((SASS, "sm_90"), (PTX, "compute_90"))
    counts = split_by_section(every, [], frozenset({section, ".text"}))
    assert counts == Counter({(section, SASS, "sm_90"): 1, (section, PTX, "compute_90"): 1})


def test_split_of_a_raw_file_uses_the_raw_section_name() -> None:
    counts = split_by_section(listed((SASS, "sm_90")), [], frozenset(), raw_section="(fatbin)")
    assert counts == Counter({("(fatbin)", SASS, "sm_90"): 1})


def test_split_never_invents_a_section_for_images_it_cannot_place() -> None:
    counts = split_by_section(listed((SASS, "sm_90")), [], frozenset({".text"}))
    assert counts == Counter({("<unknown>", SASS, "sm_90"): 1})


def test_split_refuses_a_default_listing_larger_than_the_full_one() -> None:
    with pytest.raises(ToolError, match="more images without -all"):
        split_by_section(listed((SASS, "sm_90")), listed((SASS, "sm_90"), (SASS, "sm_90")),
                         frozenset({NV, REL}))  # fmt: skip


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


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x7fELF",
        b"\x7fELF\x02\x01" + b"\xff" * 58,  # section table far past the end
        b"!<arch>\n" + b"x" * 59,
        b"!<arch>\nname/           0           0     0     644     99999999  `\n",
        os.urandom(4096),
    ],
)
def test_read_layout_survives_truncated_and_hostile_headers(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "hostile.so"
    path.write_bytes(data)
    layout = read_layout(path)
    assert layout.kind in ("host-elf", "archive", "other", "fatbin", "cubin")
    assert not layout.sections - {""}


def test_read_layout_of_a_missing_file_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="cannot read"):
        read_layout(tmp_path / "missing.so")


# -- running cuobjdump on the nvcc corpus ---------------------------------------------------------


def cuobjdump_view_of_flags(name: str) -> dict[str | None, Counter[tuple[str, CodeKind, str]]]:
    """What cuobjdump must list, per member, from the flags and its documented blind spots."""
    spec = next(s for s in SPECS if s.name == name)
    from tests.nvcc_fixtures import expected_images

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


def test_a_file_without_device_code_lists_nothing(cuobjdump: Cuobjdump) -> None:
    # The Python interpreter is an ELF without fatbins: cuobjdump exits 255, "no device code".
    assert cuobjdump.list_images(Path(sys.executable).resolve(), all_fatbins=True) == ()
    assert cuobjdump.inventory(Path(sys.executable).resolve()).total == 0


def test_a_missing_file_is_a_tool_error_naming_it(cuobjdump: Cuobjdump, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"cuobjdump failed on .*missing\.so \(exit 1\)"):
        cuobjdump.list_images(tmp_path / "missing.so", all_fatbins=True)


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


def fake_tool(tmp_path: Path, name: str, script: str) -> Path:
    """A stand-in for cuobjdump where the real one cannot misbehave on demand."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_cuobjdump_that_hangs_is_stopped_and_reported(tmp_path: Path) -> None:
    tool = Cuobjdump(fake_tool(tmp_path, "fake_cuobjdump_hangs", "exec sleep 60"), timeout_s=0.5)
    with pytest.raises(ToolError, match=r"did not finish on .* within 0.5 s"):
        tool.list_images(tmp_path / "x.so", all_fatbins=True)


def test_a_cuobjdump_killed_by_a_signal_is_reported(tmp_path: Path) -> None:
    tool = Cuobjdump(fake_tool(tmp_path, "fake_cuobjdump_killed", "kill -9 $$"))
    with pytest.raises(ToolError, match="killed by signal 9"):
        tool.list_images(tmp_path / "x.so", all_fatbins=True)


def test_a_cuobjdump_that_cannot_start_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="cannot run cuobjdump"):
        Cuobjdump(tmp_path / "no-such-cuobjdump").version()


def test_the_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCHWHEEL_CUOBJDUMP_TIMEOUT", "12.5")
    assert Cuobjdump(Path("cuobjdump")).timeout_s == 12.5
    monkeypatch.setenv("ARCHWHEEL_CUOBJDUMP_TIMEOUT", "nonsense")
    assert Cuobjdump(Path("cuobjdump")).timeout_s > 60


def test_version_reads_the_release_line(cuobjdump: Cuobjdump) -> None:
    assert re.fullmatch(r"1[3-9]\.\d+\.\d+", cuobjdump.version())


# -- finding and installing -----------------------------------------------------------------------


def test_find_prefers_the_explicit_variable_then_path_then_cuda_home(
    cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    real = cuobjdump.executable
    on_path = tmp_path / "path-bin"
    on_path.mkdir()
    (on_path / "cuobjdump").symlink_to(real)
    cuda_home = tmp_path / "cuda"
    (cuda_home / "bin").mkdir(parents=True)
    (cuda_home / "bin" / "cuobjdump").symlink_to(real)
    base = {"ARCHWHEEL_CACHE": str(tmp_path / "cache")}
    env = {**base, "PATH": str(on_path), "CUDA_HOME": str(cuda_home), "ARCHWHEEL_CUOBJDUMP": "/x"}
    assert find_cuobjdump({**env, "ARCHWHEEL_CUOBJDUMP": str(real)}, []) == real
    assert find_cuobjdump(env, []) == on_path / "cuobjdump"
    assert find_cuobjdump({**base, "PATH": "", "CUDA_HOME": str(cuda_home)}, []) == (
        cuda_home / "bin" / "cuobjdump"
    )


def test_find_looks_in_site_packages_for_the_pypi_wheel(
    cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    site = tmp_path / "site-packages"
    binary = site / "nvidia" / "cu13" / "bin" / "cuobjdump"
    binary.parent.mkdir(parents=True)
    binary.symlink_to(cuobjdump.executable)
    env = {"PATH": "", "ARCHWHEEL_CACHE": str(tmp_path / "cache")}
    assert find_cuobjdump(env, [str(tmp_path / "elsewhere"), str(site)]) == binary


def test_without_any_cuobjdump_and_no_install_the_error_says_how_to_get_one(
    tmp_path: Path,
) -> None:
    env = {"PATH": "", "ARCHWHEEL_CACHE": str(tmp_path / "cache")}
    if Path("/usr/local/cuda/bin/cuobjdump").is_file():
        pytest.skip("this machine has /usr/local/cuda/bin/cuobjdump, found as a last resort")
    assert find_cuobjdump(env, []) is None
    original = sys.path[:]
    try:
        sys.path[:] = []
        with pytest.raises(ToolError, match="cuobjdump not found") as info:
            ensure_cuobjdump(install=False, environ=env)
    finally:
        sys.path[:] = original
    assert "nvidia-cuda-cuobjdump" in info.value.one_line()


def test_cache_dir_follows_archwheel_cache_then_xdg(tmp_path: Path) -> None:
    assert cache_dir({"ARCHWHEEL_CACHE": str(tmp_path)}) == tmp_path
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "archwheel"


def test_a_failed_install_is_a_tool_error_with_pips_last_line(tmp_path: Path) -> None:
    installer = CuobjdumpInstaller(
        tmp_path / "cuobjdump", requirement="nvidia-cuda-cuobjdump==0.0.0.archwheel.no.such"
    )
    with pytest.raises(ToolError, match="could not pip install") as info:
        installer.install()
    assert "\n" not in info.value.one_line()
    assert installer.installed_binaries() == []


@pytest.mark.slow
@pytest.mark.nvcc
def test_install_on_demand_puts_a_working_cuobjdump_in_the_cache_once(
    tmp_path: Path, nvcc_corpus: NvccCorpus
) -> None:
    env = {"PATH": "", "ARCHWHEEL_CACHE": str(tmp_path / "cache")}
    original = sys.path[:]
    try:
        sys.path[:] = []  # hide the cuobjdump of this environment
        tool = ensure_cuobjdump(install=True, environ=env)
        again = ensure_cuobjdump(install=True, environ=env)
    finally:
        sys.path[:] = original
    assert tool.executable.is_relative_to(tmp_path / "cache" / "cuobjdump" / "venv")
    assert again.executable == tool.executable
    assert tool.version().startswith("13.")
    seen = tool.inventory(nvcc_corpus["multi_arch.so"].path)
    assert seen.total == sum(cuobjdump_view_of_flags("multi_arch.so")[None].values())


# -- the real torch 2.14.1 wheel (cuda-facts.md section 6) ----------------------------------------


def extract_member(wheel: Path, member: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        target = dest / Path(member).name
        with zf.open(member) as src, target.open("wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
    return target


def arch_counts(
    counts: Counter[tuple[str, CodeKind, str]], section: str, kind: CodeKind
) -> dict[str, int]:
    return {arch: n for (s, k, arch), n in counts.items() if s == section and k is kind}


@pytest.mark.realwheel
def test_torch_nvshmem_keeps_the_wheels_only_ptx_in_its_relocatable_fatbin(
    torch_wheel: Path, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    lib = extract_member(torch_wheel, "torch/lib/libtorch_nvshmem.so", tmp_path)
    seen = cuobjdump.inventory(lib)
    counts = seen.counts[None]
    assert {s for s, _, _ in counts} == {NV, REL}
    assert arch_counts(counts, NV, PTX) == {}
    assert set(arch_counts(counts, REL, PTX)) == {"compute_120"}
    every = cuobjdump.list_images(lib, all_fatbins=True)
    assert seen.total == len(every)  # the two sections partition the -all listing


@pytest.mark.realwheel
def test_torch_cuda_linalg_has_no_sm_75_and_the_same_kernels_for_every_arch(
    torch_wheel: Path, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    lib = extract_member(torch_wheel, "torch/lib/libtorch_cuda_linalg.so", tmp_path)
    counts = cuobjdump.inventory(lib).counts[None]
    sass = arch_counts(counts, NV, SASS)
    # cu130 wheels are built for 7.5;8.0;8.6;9.0;10.0;12.0+PTX, yet this library lacks sm_75.
    assert set(sass) == {"sm_80", "sm_86", "sm_90", "sm_100", "sm_120"}
    assert len(set(sass.values())) == 1
    assert arch_counts(counts, NV, PTX) == {}
    assert arch_counts(counts, REL, SASS) == {}


@pytest.mark.realwheel
@pytest.mark.slow
def test_torch_cuda_carries_kernels_beyond_its_arch_list(
    torch_wheel: Path, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    # About 17 s and 5.5 GB of RAM; memoized by the session's cuobjdump fixture.
    lib = extract_member(torch_wheel, "torch/lib/libtorch_cuda.so", tmp_path)
    counts = cuobjdump.inventory(lib).counts[None]
    sass = arch_counts(counts, NV, SASS)
    listed = {"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"}
    # sm_103f is printed sm_103 by cuobjdump: the f is lost here, restored by archwheel.
    extras = {"sm_89", "sm_90a", "sm_100a", "sm_103", "sm_120a", "sm_121a"}
    assert listed | extras <= set(sass)
    assert all(sass[a] > sass[b] for a in listed for b in extras)
    assert arch_counts(counts, NV, PTX) == {}
