"""What a configured build's libraries will link from outside the build tree (verdicts/
link_needs.py), read from the link steps of a build.ninja: words that are options, static
archives, the manylinux policy's libraries or the tree's own are left out; the toolkit's and
the driver's are counted apart. On PyTorch 2.6.0's recorded configured build (Debian's source,
Debian's CUDA 12.4, so its CUDA libraries are system libraries there) and on single words."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from archwheel.binary.buildfile import LinkStep, read_ninja
from archwheel.inspection.build_files import read_steps
from archwheel.verdicts.link_needs import link_needs, provided_by, system_libraries
from tests.support.paths import DATA


def _needs(*words: str, tree: str = "/build/src") -> tuple[tuple[str, ...], tuple[str, ...]]:
    (entry,) = link_needs([LinkStep("lib/libx.so", words)], tree) or (None,)
    return (entry.system, entry.toolkit) if entry is not None else ((), ())


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("/usr/lib/x86_64-linux-gnu/libsleef.so", (("libsleef.so",), ())),
        ("/usr/lib/x86_64-linux-gnu/libdnnl.so.3.7", (("libdnnl.so.3.7",), ())),
        ("-lsleef", (("libsleef.so",), ())),
        ("-l:libfoo.so.2", (("libfoo.so.2",), ())),
        ("/usr/local/cuda/lib/libcudart.so", ((), ("libcudart.so",))),
        ("/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so", ((), ("libcuda.so",))),
        ("-lcuda", ((), ("libcuda.so",))),
        # left out: the policy's, static archives, options, the tree's own, relative paths
        ("-lm", ((), ())),
        ("-lstdc++", ((), ())),
        ("-lcudadevrt", ((), ())),
        ("-lcudart_static", ((), ())),
        ("-l:libfoo.a", ((), ())),
        ("/usr/lib/x86_64-linux-gnu/libmicrokernels-prod.a", ((), ())),
        ("-Wl,-rpath,/usr/local/cuda/lib", ((), ())),
        ("/build/src/build/lib/libc10.so", ((), ())),
        ("lib/libc10.so", ((), ())),
    ],
)
def test_each_word_of_link_libraries(word: str, expected: tuple[object, object]) -> None:
    assert _needs(word) == expected


def test_a_build_ninja_link_step_is_read_with_its_link_libraries() -> None:
    text = (
        "rule CXX_SHARED_LIBRARY_LINKER__c10_Release\n  command = c++ $in -o $out $LINK_LIBRARIES\n"
        "rule CXX_COMPILER__c10_Release\n  command = c++ -c $in -o $out\n"
        "build lib/libc10.so: CXX_SHARED_LIBRARY_LINKER__c10_Release a.o\n"
        '  LINK_LIBRARIES = -Wl,-rpath,/x "/usr/lib/libnuma.so" -lcpuinfo -lm\n'
        "build a.o: CXX_COMPILER__c10_Release a.cpp\n"
    )
    steps = read_ninja(text)
    assert steps.links == (
        LinkStep("lib/libc10.so", ("-Wl,-rpath,/x", "/usr/lib/libnuma.so", "-lcpuinfo", "-lm")),
    )
    (entry,) = link_needs(steps.links, "/build/src")
    assert entry.system == ("libcpuinfo.so", "libnuma.so") and entry.toolkit == ()


def test_pytorch_links_debians_system_libraries(tmp_path: Path) -> None:
    with tarfile.open(DATA / "pytorch-2.6.0-cuda" / "configured.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    steps = read_steps(tmp_path / "build" / "build.ninja")
    needs = {entry.library: entry for entry in link_needs(steps.links, "/src/pytorch")}
    assert len(steps.links) == 12 and len(steps.cuda) == 341
    assert needs["lib/libc10.so.2.6.0"].system == ("libcpuinfo.so", "libnuma.so")
    cpu = needs["lib/libtorch_cpu.so.2.6.0"].system
    assert {"libsleef.so", "libdnnl.so.3.7", "libprotobuf.so", "libgomp.so"} <= set(cpu)
    assert needs["lib/libcaffe2_nvrtc.so.2.6.0"].toolkit == ("libcuda.so",)
    every = system_libraries(needs.values())
    assert "libnccl.so" in every and "libc10.so" not in every
    assert provided_by(every, ["libnccl.so.2", "libcudart.so.12"]) == ("libcudart.so", "libnccl.so")
