"""The audit gate at the end of a build: the finished wheel audited as ``archwheel audit
--expect`` audits it (real wheels with synthetic fatbins)."""

from __future__ import annotations

import json
from pathlib import Path

from archwheel.binary.fatbin import FLAG_ARCH_SPECIFIC
from archwheel.facts.arch import ArchList
from archwheel.wheelbuild.wheel.gate import audit_gate
from tests.support.builders import Entry, container, elf64
from tests.support.index_wheels import device_library, make_dist


def _wheel(folder: Path, *sms: int) -> Path:
    return make_dist(
        folder, "kern", "1.0", platform_tag="linux_x86_64",
        libraries={"libk.so": device_library(*sms), "plain.so": device_library()},
    )  # fmt: skip


def test_a_wheel_holding_every_requested_arch_passes(tmp_path: Path) -> None:
    verdict = audit_gate(_wheel(tmp_path, 80, 90), ArchList.parse("8.0;9.0"))
    assert verdict.ok, verdict.summary
    assert verdict.summary.startswith("all 1 libraries with device code (kern/libk.so) hold")
    document = json.loads(json.dumps(verdict.report))  # the audit JSON document, as written
    assert document["inputs"][0]["source"].endswith("kern-1.0-py3-none-linux_x86_64.whl")


def test_a_missing_arch_fails_naming_the_library(tmp_path: Path) -> None:
    verdict = audit_gate(_wheel(tmp_path, 90), ArchList.parse("8.0;9.0"))
    assert not verdict.ok
    assert verdict.summary.startswith("kern/libk.so lacks")
    assert "8.0" in verdict.summary or "sm_80" in verdict.summary


def test_a_wheel_without_device_code_fails(tmp_path: Path) -> None:
    wheel = make_dist(tmp_path, "kern", "1.0", platform_tag="linux_x86_64",
                      libraries={"plain.so": device_library()})  # fmt: skip
    verdict = audit_gate(wheel, ArchList.parse("9.0"))
    assert not verdict.ok and verdict.summary == "no library in the wheel carries device code"


def test_an_extra_arch_pytorch_adds_cites_its_rule(tmp_path: Path) -> None:
    entries = [Entry(sm=80), Entry(sm=90), Entry(sm=90, flags=0x11 | FLAG_ARCH_SPECIFIC)]
    library = elf64([(".nv_fatbin", container(*entries))])
    wheel = make_dist(tmp_path, "torch", "2.6.0", platform_tag="linux_x86_64",
                      libraries={"lib/libtorch_cuda.so": library})  # fmt: skip
    verdict = audit_gate(wheel, ArchList.parse("8.0;9.0"))
    assert verdict.ok, verdict.summary
    assert (
        "beyond the request: sm_90a (PyTorch's own CMake adds sm_90a: RowwiseScaledMM.cu "
        "(pytorch-rowwise-scaled-mm-sm90a, cmake/Codegen.cmake:79-92" in verdict.summary
    )
