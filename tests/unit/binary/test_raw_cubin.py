"""Raw cubins: ELF cubins stored outside any fatbin container, in ordinary data sections.

The cubins here are built byte by byte (an ELF64 with e_machine 190 and nvcc's e_flags layout,
ABI version 8: the SM in bits 8-15; ptxas' `.note.nv.tkinfo` naming `-arch sm_90a`); the same
scanner on real nvcc output is tests/integration/nvcc/test_raw_cubin_nvcc.py.
"""

from __future__ import annotations

import json
import struct
from importlib import resources

import jsonschema
import pytest

from archwheel.binary.model import InputInventory, LibraryInventory, Origin, Problem, Severity
from archwheel.binary.scan import bounds
from archwheel.binary.scan.binary import scan_bytes_full
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import ComputeCapability
from archwheel.verdicts.audit import audit, audit_document
from archwheel.verdicts.compat.gpus import Gpu
from archwheel.verdicts.compat.judge import judge_library, split_modules
from archwheel.verdicts.vocabulary import Verdict
from tests.support.builders import Entry, container, elf64

FACTS = load_facts()


def cubin(sm: int, arch_option: str | None = None, *, machine: int = 190) -> bytes:
    """An ELF cubin as nvcc 13 lays it out: e_flags = 0x06000002 | sm << 8, ABI version 8."""
    sections = [(".text.k", b"\x4d" * 96), (".nv.info", b"\x04\x2f\x08\x00" * 4)]
    if arch_option is not None:
        note = b"\x0c\0\0\0" + b"NVIDIA Corp\0" + f"ptxas -arch {arch_option} -m 64".encode()
        sections.insert(0, (".note.nv.tkinfo", note))
    return elf64(sections, e_type=2, machine=machine, e_flags=0x06000002 | sm << 8, abiversion=8)


def _scan(data: bytes) -> tuple[LibraryInventory, list[Problem]]:
    libraries, problems = scan_bytes_full("libk.so", data)
    [lib] = libraries
    return lib, problems


def _host(*blobs: bytes, section: str = ".rodata") -> bytes:
    body = b"".join(b"pad-" * 4 + blob for blob in blobs) + b"tail" * 4
    return elf64([(".text", b"\x90" * 64), (section, body)])


def test_a_raw_cubin_in_rodata_is_found_with_its_arch_and_size() -> None:
    raw = cubin(90, "sm_90a")
    lib, problems = _scan(_host(raw))
    assert problems == []
    [entry] = lib.entries
    assert (entry.section, entry.arch, entry.origin) == (".rodata", "sm_90a", Origin.RAW_CUBIN)
    assert entry.stored_bytes == len(raw) == entry.uncompressed_bytes
    assert lib.containers == ()
    assert lib.raw_cubins == (entry,)


@pytest.mark.parametrize(
    ("sm", "option", "arch"),
    [(90, "sm_90", "sm_90"), (100, "sm_100f", "sm_100f"), (120, "sm_120a", "sm_120a"),
     (87, "sm_87", "sm_87"), (75, "sm_75", "sm_75")],
)  # fmt: skip
def test_the_suffix_comes_from_the_ptxas_note(sm: int, option: str, arch: str) -> None:
    lib, _ = _scan(_host(cubin(sm, option)))
    assert [e.arch for e in lib.entries] == [arch]


def test_without_a_note_naming_its_sm_the_cubin_is_plain_with_one_warning() -> None:
    lib, problems = _scan(_host(cubin(90), cubin(100, "sm_90a"), cubin(100), cubin(80)))
    assert [e.arch for e in lib.entries] == ["sm_90", "sm_100", "sm_100", "sm_80"]
    # sm_80 has no 'a'/'f' variant at all: nothing is unknown about it.
    assert [(p.severity, p.message) for p in problems] == [
        (
            Severity.WARNING,
            "3 raw cubins (sm_90, sm_100) record no 'a'/'f' suffix (neither e_flags nor a ptxas "
            "note says it): reported plain",
        )
    ]


def test_several_raw_cubins_in_data_sections() -> None:
    lib, problems = _scan(_host(cubin(80, "sm_80"), cubin(90, "sm_90"), section=".data"))
    assert [(e.section, e.arch) for e in lib.entries] == [(".data", "sm_80"), (".data", "sm_90")]
    assert problems == []


def test_an_embedded_host_elf_is_not_device_code() -> None:
    lib, problems = _scan(_host(cubin(90, "sm_90", machine=62)))
    assert lib.entries == () and problems == []


@pytest.mark.parametrize(
    "blob",
    [
        b"\x7fELF",  # the magic alone (a loader's string constant)
        b"\x7fELF" + b"\x02\x01\x01" + b"\xff" * 40,  # a header that parses to nothing
        b"\x7fELF\x05\x01" + b"\0" * 80,  # invalid class
    ],
)
def test_elf_magic_without_a_valid_header_is_ignored(blob: bytes) -> None:
    lib, problems = _scan(_host(blob))
    assert lib.entries == () and problems == []


def test_a_cuda_header_whose_section_table_lies_is_a_damaged_cubin() -> None:
    raw = bytearray(cubin(90, "sm_90"))
    struct.pack_into("<H", raw, 60, 9000)  # e_shnum beyond the limit
    lib, problems = _scan(_host(bytes(raw)))
    assert lib.entries == ()
    [problem] = problems
    assert problem.severity is Severity.ERROR
    assert "damaged ELF cubin" in problem.message and "limit 4096" in problem.message


def test_a_cubin_cut_by_the_end_of_its_section_is_not_counted() -> None:
    raw = cubin(90, "sm_90")
    data = elf64([(".rodata", b"pad-" + raw[: len(raw) // 2]), (".data", raw[len(raw) // 2 :])])
    lib, problems = _scan(data)
    assert lib.entries == ()
    assert any(
        "remain in the section" in p.message for p in problems if p.severity.value == "error"
    )


def test_a_cubin_inside_a_fatbin_entry_is_counted_once() -> None:
    # An uncompressed fatbin entry's payload is an ELF cubin: it is that entry, not a raw cubin.
    raw = cubin(90, "sm_90")
    body = container(Entry(sm=90, payload=raw))
    lib, problems = _scan(elf64([(".nv_fatbin", body)]))
    assert [(e.arch, e.origin) for e in lib.entries] == [("sm_90", Origin.FATBIN)]
    assert problems == []


def test_raw_cubin_candidates_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_RAW_CUBINS", 3)
    lib, problems = _scan(_host(*[cubin(90, "sm_90")] * 6))
    assert len(lib.entries) == 3
    limits = [p for p in problems if "(limit)" in p.message]
    assert len(limits) == 1 and "more than 3 embedded ELF headers" in limits[0].message


# -- verdicts -----------------------------------------------------------------------------------


def test_raw_cubins_are_one_module_beside_the_containers() -> None:
    data = elf64(
        [
            (".nv_fatbin", container(Entry(sm=80), Entry(sm=90))),
            (".rodata", b"pad-" + cubin(80, "sm_80")),
            (".data", b"pad-" + cubin(120, "sm_120")),
        ]
    )
    lib, _ = _scan(data)
    modules, exact = split_modules(lib)
    assert [(m.section, [e.arch for e in m.entries]) for m in modules] == [
        (".nv_fatbin", ["sm_80", "sm_90"]),
        (".data,.rodata", ["sm_80", "sm_120"]),
    ]
    assert not exact  # which raw cubins serve one kernel set is not recorded
    on_90 = judge_library(lib, Gpu(ComputeCapability(9, 0)), facts=FACTS)
    # The raw cubins have no sm_90: beside fatbin code that is no missing module (raw-cubin).
    assert on_90.verdict is Verdict.NATIVE
    assert on_90.modules == 1 and on_90.missing_modules == 0
    said = [r.text for r in on_90.reasons if r.rule_id == "raw-cubin"]
    assert said == [
        "raw cubins sm_120, sm_80 (outside any fatbin) do not serve 9.0; the library loads "
        "them itself, so they are not counted as a missing module"
    ]
    on_120 = judge_library(lib, Gpu(ComputeCapability(12, 0)), facts=FACTS)
    assert on_120.verdict is Verdict.NO_KERNEL_IMAGE  # the fatbin module has no sm_120
    on_86 = judge_library(lib, Gpu(ComputeCapability(8, 6)), facts=FACTS)
    assert on_86.verdict is Verdict.NATIVE


def test_a_library_with_only_raw_cubins_is_judged_by_them() -> None:
    lib, _ = _scan(_host(cubin(90, "sm_90a")))
    assert judge_library(lib, Gpu(ComputeCapability(9, 0)), facts=FACTS).verdict is Verdict.NATIVE
    assert (
        judge_library(lib, Gpu(ComputeCapability(10, 0)), facts=FACTS).verdict
        is Verdict.NO_KERNEL_IMAGE
    )


def test_audit_counts_raw_cubins_and_the_json_says_where_they_are() -> None:
    from archwheel.facts.arch import ArchList

    lib, problems = _scan(_host(cubin(90, "sm_90a"), cubin(80, "sm_80")))
    inv = InputInventory("libk.so", "file", (lib,), tuple(problems))
    report = audit(inv, ArchList.parse("8.0;9.0a"))
    assert report.ok
    missing = audit(inv, ArchList.parse("8.0;9.0"))
    assert [v.missing for v in missing.libraries] == [("sm_90",)]
    document = audit_document([report])
    schema = json.loads(
        resources.files("archwheel.interfaces.schema").joinpath("audit.schema.json").read_text()
    )
    jsonschema.validate(document, schema)
    [row] = document["inputs"][0]["libraries"]
    assert row["raw_cubins"] == 2 and row["containers"] == 0
    assert {(i["arch"], i["origin"], i["section"]) for i in row["images"]} == {
        ("sm_80", "raw-cubin", ".rodata"),
        ("sm_90a", "raw-cubin", ".rodata"),
    }
