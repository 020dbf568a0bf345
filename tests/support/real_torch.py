"""What the real torch 2.14.1+cu130 wheel holds and gets, written out by hand for the tests that
check it through hand-built inventories (tests/support/inventory_builders.py) and through the real
wheel and scanner."""

from __future__ import annotations

from archwheel.binary.model import InputInventory
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import ComputeCapability, CudaVersion
from archwheel.verdicts.compat.gpus import Gpu
from archwheel.verdicts.compat.judge import judge_input
from archwheel.verdicts.compat.report import build_report
from archwheel.verdicts.vocabulary import Verdict

FACTS = load_facts()

# The wheel's TORCH_CUDA_ARCH_LIST as cubin names.
TORCH_2141_CU130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]

# What the torch 2.14.1+cu130 wheel gets per GPU, worked out by hand from its inventory
# and the rules: library -> verdict and best cubins per module.
_NATIVE = Verdict.NATIVE
_MISSING = Verdict.NO_KERNEL_IMAGE
TORCH_EXPECTED: dict[str, dict[str, tuple[Verdict, tuple[tuple[str, int], ...]]]] = {
    "7.0": {
        "libtorch_cuda.so": (_MISSING, ()),
        "libtorch_cuda_linalg.so": (_MISSING, ()),
        "libtorch_nvshmem.so": (_MISSING, ()),
    },
    "7.5": {
        "libtorch_cuda.so": (_NATIVE, (("sm_75", 475),)),
        # sm_80 is its lowest cubin: no 7.x cubin, no PTX, so nothing runs on a T4.
        "libtorch_cuda_linalg.so": (_MISSING, ()),
        "libtorch_nvshmem.so": (_NATIVE, (("sm_75", 1),)),
    },
    "8.0": {
        "libtorch_cuda.so": (_NATIVE, (("sm_80", 475),)),
        "libtorch_cuda_linalg.so": (_NATIVE, (("sm_80", 65),)),
        "libtorch_nvshmem.so": (_NATIVE, (("sm_80", 1),)),
    },
    "8.6": {
        "libtorch_cuda.so": (_NATIVE, (("sm_86", 475),)),
        "libtorch_cuda_linalg.so": (_NATIVE, (("sm_86", 65),)),
        "libtorch_nvshmem.so": (_NATIVE, (("sm_86", 1),)),
    },
    "8.9": {
        "libtorch_cuda.so": (_NATIVE, (("sm_86", 474), ("sm_89", 1))),
        "libtorch_cuda_linalg.so": (_NATIVE, (("sm_86", 65),)),
        "libtorch_nvshmem.so": (_NATIVE, (("sm_86", 1),)),
    },
    "9.0": {
        "libtorch_cuda.so": (_NATIVE, (("sm_90", 471), ("sm_90a", 4))),
        "libtorch_cuda_linalg.so": (_NATIVE, (("sm_90", 65),)),
        "libtorch_nvshmem.so": (_NATIVE, (("sm_90", 1),)),
    },
    "10.0": {
        "libtorch_cuda.so": (_NATIVE, (("sm_100", 416), ("sm_100a", 59))),
        "libtorch_cuda_linalg.so": (_NATIVE, (("sm_100", 65),)),
        "libtorch_nvshmem.so": (_NATIVE, (("sm_100", 1),)),
    },
    "10.3": {
        "libtorch_cuda.so": (_NATIVE, (("sm_100", 416), ("sm_103f", 59))),
        "libtorch_cuda_linalg.so": (_NATIVE, (("sm_100", 65),)),
        "libtorch_nvshmem.so": (_NATIVE, (("sm_100", 1),)),
    },
    "12.0": {
        "libtorch_cuda.so": (_NATIVE, (("sm_120", 474), ("sm_120a", 1))),
        "libtorch_cuda_linalg.so": (_NATIVE, (("sm_120", 65),)),
        "libtorch_nvshmem.so": (_NATIVE, (("sm_120", 1),)),
    },
    "12.1": {
        "libtorch_cuda.so": (_NATIVE, (("sm_120", 474), ("sm_121a", 1))),
        "libtorch_cuda_linalg.so": (_NATIVE, (("sm_120", 65),)),
        "libtorch_nvshmem.so": (_NATIVE, (("sm_120", 1),)),
    },
}
TORCH_WHEEL_VERDICT = {cc: (_MISSING if cc in ("7.0", "7.5") else _NATIVE) for cc in TORCH_EXPECTED}


def check_torch_verdicts(inv: InputInventory) -> None:
    gpus = [Gpu(ComputeCapability.parse(cc)) for cc in TORCH_EXPECTED]
    judged = judge_input(inv, gpus, runtime=CudaVersion(13, 0), name="torch", facts=FACTS)
    for per_gpu in judged.per_gpu:
        cc = str(per_gpu.gpu.cc)
        got = {
            lib.library.rsplit("/", 1)[-1]: (lib.verdict, lib.native_archs())
            for lib in per_gpu.libraries
        }
        assert got == TORCH_EXPECTED[cc], cc
        assert per_gpu.verdict is TORCH_WHEEL_VERDICT[cc], cc
    report = build_report([judged], gpus, None, facts=FACTS)
    assert report.exit_code == 11
