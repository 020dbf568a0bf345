"""Raw cubins from real nvcc output: `nvcc -cubin` files embedded in a shared library's .rodata
(a C array compiled with gcc -shared) and added as a data section (objcopy --add-section), as
some NVIDIA libraries store device code for cuModuleLoadData.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from archwheel.binary.model import Origin, Severity
from archwheel.binary.scan.binary import scan_file
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import ComputeCapability
from archwheel.verdicts.compat.gpus import Gpu
from archwheel.verdicts.compat.judge import judge_library
from archwheel.verdicts.vocabulary import Verdict

FACTS = load_facts()

KERNEL = 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = 42; }\n'
ARCHS = ("sm_90", "sm_90a", "sm_100f", "sm_87")


@pytest.fixture(scope="module")
def cubins(nvcc: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("rawcubin")
    (folder / "k.cu").write_text(KERNEL)
    out: dict[str, bytes] = {}
    for arch in ARCHS:
        target = folder / f"k_{arch}.cubin"
        subprocess.run(
            [str(nvcc), "-cubin", f"-arch={arch}", "-o", str(target), "k.cu"],
            cwd=folder, check=True, capture_output=True,
        )  # fmt: skip
        out[arch] = target.read_bytes()
    return out


def _c_array(name: str, data: bytes) -> str:
    body = ",".join(str(b) for b in data)
    return f"__attribute__((used)) const unsigned char {name}[{len(data)}] = {{{body}}};\n"


def _gcc_shared(folder: Path, source: str) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found")
    (folder / "lib.c").write_text(source)
    library = folder / "libraw.so"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-o", str(library), "lib.c"],
        cwd=folder, check=True, capture_output=True,
    )  # fmt: skip
    return library


@pytest.mark.nvcc
def test_nvcc_cubins_in_rodata_are_found_with_their_arch(
    cubins: dict[str, bytes], tmp_path: Path
) -> None:
    source = "".join(_c_array(f"cubin_{arch}", data) for arch, data in cubins.items())
    library = _gcc_shared(tmp_path, source + "int f(void) { return 0; }\n")
    [lib], problems = scan_file(library)
    assert [p for p in problems if p.severity is Severity.ERROR] == []
    found = sorted((e.arch, e.stored_bytes) for e in lib.entries)
    assert found == sorted((arch, len(data)) for arch, data in cubins.items())
    assert {e.section for e in lib.entries} == {".rodata"}
    assert all(e.origin is Origin.RAW_CUBIN for e in lib.entries)
    # Each entry's bytes are exactly one of nvcc's files.
    data = library.read_bytes()
    for entry in lib.entries:
        assert data[entry.offset : entry.offset + entry.stored_bytes] in cubins.values()
    # Counted in the verdicts: sm_90/sm_90a serve 9.0, sm_100f serves 10.3, sm_87 serves Orin
    # only (rule sass-integrated), nothing serves 8.0.
    for cc, verdict in (("9.0", Verdict.NATIVE), ("10.3", Verdict.NATIVE),
                        ("8.7", Verdict.NATIVE), ("8.0", Verdict.NO_KERNEL_IMAGE),
                        ("8.9", Verdict.NO_KERNEL_IMAGE)):  # fmt: skip
        judged = judge_library(lib, Gpu(ComputeCapability.parse(cc)), facts=FACTS)
        assert judged.verdict is verdict, cc


@pytest.mark.nvcc
def test_nvcc_cubin_added_as_a_section_by_objcopy(cubins: dict[str, bytes], tmp_path: Path) -> None:
    objcopy = shutil.which("objcopy")
    if objcopy is None:
        pytest.skip("objcopy not found")
    library = _gcc_shared(tmp_path, "int f(void) { return 0; }\n")
    (tmp_path / "blob").write_bytes(cubins["sm_90a"])
    patched = tmp_path / "libpatched.so"
    subprocess.run(
        [objcopy, "--add-section", ".kernels=blob", "--set-section-flags", ".kernels=alloc,readonly",
         str(library), str(patched)],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    [lib], problems = scan_file(patched)
    assert problems == []
    assert [(e.section, e.arch, e.origin) for e in lib.entries] == [
        (".kernels", "sm_90a", Origin.RAW_CUBIN)
    ]


@pytest.mark.nvcc
def test_a_host_elf_and_a_torn_cubin_next_to_real_ones(
    cubins: dict[str, bytes], tmp_path: Path
) -> None:
    (tmp_path / "host").mkdir()
    host = _gcc_shared(tmp_path / "host", "int g;\n")
    torn = bytearray(cubins["sm_90"])
    torn[0x28:0x30] = (len(torn) * 4).to_bytes(8, "little")  # e_shoff past the cubin's room
    source = (
        _c_array("host_elf", host.read_bytes())
        + _c_array("torn", bytes(torn))
        + _c_array("good", cubins["sm_100f"])
    )
    library = _gcc_shared(tmp_path, source + "int f(void) { return 0; }\n")
    [lib], problems = scan_file(library)
    assert [e.arch for e in lib.entries] == ["sm_100f"]
    errors = [p.message for p in problems if p.severity is Severity.ERROR]
    assert len(errors) == 1 and "raw cubin at" in errors[0] and ".rodata" in errors[0]
