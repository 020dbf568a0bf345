"""A toolkit's facts (cuda_facts.toml) against that toolkit's own nvcc.

For each toolkit checked here (13.0: the host's nvcc; 13.2: NVIDIA's PyPI wheels, see
tests/support/cuda_toolchains.py) the compiler itself says what the facts claim:
``nvcc --version`` (the release), ``--list-gpu-arch``/``--list-gpu-code`` (the plain targets),
which ``sm_XY``/``compute_XY`` with and without the 'a'/'f' suffix it compiles and which it refuses
(against what archwheel derives from the facts: ``toolkit_problem``), and the ``.version``
(PTX ISA) and ``.target`` lines of the PTX it emits. What a compiler cannot show (the minimum
driver) is not checked here.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.facts.arch import CodeKind, Target, Variant, toolkit_problem
from archwheel.facts.catalog import Toolkit, load_facts
from archwheel.facts.versions import ComputeCapability, CudaVersion, PtxIsaVersion
from tests.support.components import require

pytestmark = [pytest.mark.nvcc, pytest.mark.slow]

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
# The fixture that gives each checked release's nvcc.
NVCC_FOR = {"13.0": "nvcc", "13.2": "nvcc_13_2"}


@dataclass(frozen=True)
class Toolchain:
    """One nvcc, what it lists, and what it made of KERNEL for every target the facts record."""

    nvcc: Path
    release: CudaVersion
    version_text: str
    virtual: frozenset[ComputeCapability]  # --list-gpu-arch
    real: frozenset[ComputeCapability]  # --list-gpu-code
    toolkit: Toolkit
    accepted: tuple[Target, ...]  # what the facts say it compiles
    kept: Path  # nvcc --keep-dir: k.compute_XY.ptx, k.compute_XY.sm_XY.cubin
    errors: tuple[str, ...]  # what nvcc said where it refused a recorded target


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False,
                          timeout=600)  # fmt: skip


def _listed(nvcc: Path, option: str, prefix: str) -> frozenset[ComputeCapability]:
    proc = _run(nvcc, option)
    assert proc.returncode == 0, proc.stderr
    names = proc.stdout.split()
    assert names and all(re.fullmatch(prefix + r"_\d{2,3}", n) for n in names), proc.stdout
    return frozenset(ComputeCapability.from_number(int(n.split("_")[1])) for n in names)


def _every_target() -> list[Target]:
    """Every known compute capability with every variant."""
    return [Target(cc, v) for cc in sorted(load_facts().capabilities) for v in Variant]


@pytest.fixture(scope="module", params=sorted(NVCC_FOR))
def toolchain(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Toolchain:
    wanted = CudaVersion.parse(request.param)
    nvcc: Path = request.getfixturevalue(NVCC_FOR[request.param])
    version = _run(nvcc, "--version")
    assert version.returncode == 0, version.stderr
    release = re.search(r"release (\d+\.\d+), V([\d.]+)", version.stdout)
    assert release is not None, version.stdout
    require(CudaVersion.parse(release.group(1)) == wanted,
            f"{nvcc} is CUDA {release.group(1)}, not {wanted}")  # fmt: skip
    facts = load_facts()
    toolkit = facts.toolkit(wanted)
    assert toolkit.version == wanted, f"no facts recorded for CUDA {wanted}"
    accepted = tuple(t for t in _every_target() if toolkit_problem(t, toolkit, facts) is None)
    folder = tmp_path_factory.mktemp(f"cuda-{wanted}")
    (folder / "k.cu").write_text(KERNEL)
    kept = folder / "kept"
    kept.mkdir()
    # One nvcc run per variant builds SASS and PTX of every target the facts record (a refused
    # one fails its run and names itself). nvcc refuses sm_100 and sm_100f in one run ("The
    # same GPU code (`sm_100f`) generated for non family-specific and family-specific GPU arch").
    errors: list[str] = []
    for variant in Variant:
        gencodes = [f"-gencode=arch={t.compute},code=[{t.sm},{t.compute}]"
                    for t in accepted if t.variant is variant]  # fmt: skip
        if not gencodes:
            continue
        proc = _run(nvcc, "-fatbin", "--keep", "--keep-dir", kept,
                    "-o", folder / f"k{variant.value}.fatbin", folder / "k.cu", *gencodes)  # fmt: skip
        if proc.returncode != 0:
            errors.append(proc.stderr.strip())
    return Toolchain(
        nvcc=nvcc,
        release=wanted,
        version_text=release.group(2),
        virtual=_listed(nvcc, "--list-gpu-arch", "compute"),
        real=_listed(nvcc, "--list-gpu-code", "sm"),
        toolkit=toolkit,
        accepted=accepted,
        kept=kept,
        errors=tuple(errors),
    )


def test_nvcc_lists_exactly_the_recorded_plain_targets(toolchain: Toolchain) -> None:
    assert toolchain.virtual == toolchain.real == toolchain.toolkit.targets


def test_every_recorded_target_compiles_to_sass_and_ptx(toolchain: Toolchain) -> None:
    tk = toolchain.toolkit
    expected = ({Target(cc) for cc in tk.targets}
                | {Target(cc, Variant.ARCH_SPECIFIC) for cc in tk.arch_specific}
                | {Target(cc, Variant.FAMILY_SPECIFIC) for cc in tk.family_specific})  # fmt: skip
    assert set(toolchain.accepted) == expected  # what toolkit_problem derives is the data
    assert not toolchain.errors, f"nvcc {toolchain.release} refused a recorded target"
    for t in toolchain.accepted:
        assert (toolchain.kept / f"k.{t.compute}.ptx").stat().st_size > 0, t
        assert (toolchain.kept / f"k.{t.compute}.{t.sm}.cubin").stat().st_size > 0, t


def test_the_ptx_carries_the_recorded_isa_and_its_target(toolchain: Toolchain) -> None:
    for t in toolchain.accepted:
        text = (toolchain.kept / f"k.{t.compute}.ptx").read_text()
        version = re.search(r"^\.version (\d+\.\d+)$", text, re.MULTILINE)
        target = re.search(r"^\.target (\S+)$", text, re.MULTILINE)
        assert version is not None and target is not None, text[:300]
        assert PtxIsaVersion.parse(version.group(1)) == toolchain.toolkit.ptx_isa, t
        # PTX names its target sm_XY[a|f] (a virtual arch although it says sm).
        assert target.group(1) == t.sm


def test_nvcc_refuses_every_target_the_facts_do_not_record(toolchain: Toolchain) -> None:
    refused = [t for t in _every_target() if t not in toolchain.accepted]
    assert refused
    source = toolchain.kept.parent / "k.cu"
    for t in refused:
        for kind, flag in ((CodeKind.SASS, "-cubin"), (CodeKind.PTX, "-ptx")):
            name = t.name(kind)
            out = toolchain.kept.parent / f"refused.{name}"
            proc = _run(toolchain.nvcc, flag, f"-arch={name}", "-o", out, source)
            assert proc.returncode != 0, f"nvcc {toolchain.release} compiles {name}"
            assert f"Unsupported gpu architecture '{name}'" in proc.stderr, proc.stderr


def test_the_host_ptxas_reads_the_ptx_only_where_the_facts_say_its_isa_allows(
    toolchain: Toolchain, nvcc: Path
) -> None:
    """ptx_isa_driver: PTX ISA N needs CUDA >= the release that introduced it. The host's
    ptxas (13.0) stands in for a driver of its release: it reads its own PTX ISA and refuses a
    newer one ("Unsupported .version 9.2; current version is '9.0'")."""
    host = _run(nvcc, "--version")
    found = re.search(r"release (\d+\.\d+)", host.stdout)
    assert found is not None, host.stdout
    host_release = CudaVersion.parse(found.group(1))
    isa = toolchain.toolkit.ptx_isa
    needs = load_facts().ptx_isa_min_cuda(isa)
    assert needs is not None and needs <= toolchain.release
    oldest = Target(min(toolchain.toolkit.targets))
    ptx = toolchain.kept / f"k.{oldest.compute}.ptx"
    ptxas = nvcc.parent / "ptxas"
    require(ptxas.is_file(), f"no ptxas beside the host's {nvcc}")
    proc = _run(ptxas, f"-arch={oldest.sm}", "-o",
                toolchain.kept.parent / "host.cubin", ptx)  # fmt: skip
    if needs <= host_release:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode != 0
        assert f"Unsupported .version {isa}" in proc.stderr, proc.stderr
