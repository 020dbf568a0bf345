"""Hand-built inventories for testing verdict logic without the scanner.

A library is described as its modules (fatbin containers), each a list of image names
(``sm_90a``, ``compute_120``); each module becomes a ``FatbinContainer`` whose entries get
consecutive offsets after its 16-byte header, as the scanner reports them.

``TORCH_2_14_1_CU130`` transcribes what the real torch 2.14.1+cu130 wheel contains per module
(measured on the wheel and consistent with cuda-facts.md section 6): the real-wheel tests check
the same verdicts through the real scanner.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Sequence
from pathlib import Path

from archwheel.binary.model import (
    Compression,
    FatbinContainer,
    FatbinEntry,
    InputInventory,
    LibraryInventory,
)
from archwheel.facts.arch import CodeKind, Target
from archwheel.facts.versions import PtxIsaVersion

ENTRY_BYTES = 1000
CONTAINER_HEADER = 16


def entry(
    name: str, offset: int, section: str, isa: str = "9.0", size: int = ENTRY_BYTES
) -> FatbinEntry:
    kind, target = Target.from_name(name)
    return FatbinEntry(
        section=section,
        offset=offset,
        kind=kind,
        target=target,
        compression=Compression.ZSTD,
        stored_bytes=size,
        uncompressed_bytes=size * 3,
        ptx_isa=PtxIsaVersion.parse(isa) if kind is CodeKind.PTX else None,
    )


def library(
    path: str,
    modules: Sequence[Sequence[str]],
    *,
    section: str = ".nv_fatbin",
    sections: Sequence[str] | None = None,
    isa: str = "9.0",
    sizes: dict[str, int] | None = None,
) -> LibraryInventory:
    """A library whose modules hold the named images (one section, or one per module)."""
    containers: list[FatbinContainer] = []
    offset = 4096
    for index, names in enumerate(modules):
        module_section = sections[index] if sections else section
        start = offset
        offset += CONTAINER_HEADER
        entries: list[FatbinEntry] = []
        for name in names:
            size = (sizes or {}).get(name, ENTRY_BYTES)
            entries.append(entry(name, offset, module_section, isa, size))
            offset += size
        containers.append(FatbinContainer(module_section, start, offset - start, tuple(entries)))
        offset += 8  # alignment padding between containers
    return LibraryInventory(
        path=path,
        file_kind="shared-object",
        size=offset + 4096,
        entries=tuple(e for c in containers for e in c.entries),
        containers=tuple(containers),
    )


def repeated(count: int, names: str) -> list[list[str]]:
    return [names.split() for _ in range(count)]


def inventory(source: str, *libraries: LibraryInventory) -> InputInventory:
    return InputInventory(source=source, input_kind="wheel", libraries=tuple(libraries))


# What torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl (CUDA 13.0) carries, module by module.
_BASE = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
TORCH_CUDA_MODULES = (
    repeated(414, _BASE)
    + repeated(2, _BASE + " sm_90a")
    + repeated(57, _BASE + " sm_100a sm_103f")
    + repeated(1, _BASE + " sm_90a sm_100a sm_103f")
    + repeated(1, _BASE + " sm_89 sm_90a sm_100a sm_103f sm_120a sm_121a")
)
LINALG_MODULES = repeated(65, "sm_80 sm_86 sm_90 sm_100 sm_120")
NVSHMEM_MODULES = [
    _BASE.split(),
    *repeated(2, "sm_75 sm_80 sm_89 sm_90 sm_100 sm_120 compute_120"),
    *repeated(1, _BASE),
]
NVSHMEM_SECTIONS = [".nv_fatbin", "__nv_relfatbin", "__nv_relfatbin", "__nv_relfatbin"]


def torch_2_14_1_cu130() -> InputInventory:
    return inventory(
        "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        library("torch/lib/libtorch_cuda.so", TORCH_CUDA_MODULES),
        library("torch/lib/libtorch_cuda_linalg.so", LINALG_MODULES),
        library("torch/lib/libtorch_nvshmem.so", NVSHMEM_MODULES, sections=NVSHMEM_SECTIONS),
        LibraryInventory("torch/lib/libtorch_cpu.so", "shared-object", 446314593),
    )


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(
    folder: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    *,
    requires: Sequence[str] = (),
    tag: str = "py3-none-any",
) -> Path:
    """A valid wheel (METADATA, WHEEL, RECORD with real hashes) holding ``files``."""
    dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    members = dict(files)
    members[f"{dist_info}/METADATA"] = metadata.encode()
    members[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: archwheel-tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
    ).encode()
    record = "".join(f"{path},{record_hash(data)},{len(data)}\n" for path, data in members.items())
    record += f"{dist_info}/RECORD,,\n"
    members[f"{dist_info}/RECORD"] = record.encode()
    path = folder / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return path
