"""Variants of real nvcc-made libraries: published with ``--variants``, installed by the real uv
0.13.9 with the GPU forced; ``archwheel audit --installed`` confirms the SASS each got."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import CliRun
from tests.support.variant_wheels import arch_wheels, uv_variant_install

pytestmark = [pytest.mark.nvcc]

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] *= 2.f; }\n"


@pytest.fixture(scope="module")
def nvcc_wheels(
    nvcc: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[int, Path], Path]:
    work = tmp_path_factory.mktemp("nvcc")
    (work / "k.cu").write_text(KERNEL)

    def library(*sms: int) -> bytes:
        out = work / ("k" + "_".join(map(str, sms)) + ".so")
        gencodes = [f"-gencode=arch=compute_{sm},code=sm_{sm}" for sm in sms]
        subprocess.run([str(nvcc), "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
                        *gencodes, "-o", str(out), str(work / "k.cu")], check=True)  # fmt: skip
        return out.read_bytes()

    return arch_wheels(work / "wheels", library)


def test_uv_picks_the_nvcc_build_of_each_gpu(
    nvcc_wheels: tuple[dict[int, Path], Path], cli_run: CliRun, tmp_path: Path
) -> None:
    per_arch, default = nvcc_wheels
    index = tmp_path / "index"
    code, _, err = cli_run("publish", *map(str, per_arch.values()), "--index", str(index),
                           "--cuda", "13.0", "--variants", "--default", str(default))  # fmt: skip
    assert code == 0, err
    url = (index / "current" / "simple").as_uri()
    for sm, library, expect, sass in (
        ("8.6", "_k80.so", "8.0", "sm_80"),
        ("12.0", "_k120.so", "12.0", "sm_120"),
    ):
        venv = tmp_path / f"v{sm}"
        proc, libraries = uv_variant_install(venv, ["--index-url", url], sm, "13.0")
        assert proc.returncode == 0, proc.stderr
        assert libraries == [library]
        python = str(next(venv.glob("bin/python")))
        code, out, err = cli_run("audit", "--installed", "vext", "--interpreter", python,
                                 "--expect", expect, "--format", "json")  # fmt: skip
        assert code == 0, out + err
        (found,) = json.loads(out)["inputs"]
        assert [a["arch"] for a in found["archs"]] == [sass]  # only this GPU's SASS
