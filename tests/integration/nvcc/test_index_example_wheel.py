"""The example CUDA extension, compiled here with the real nvcc (no container), published into
an index through archwheel's own audit and installed from it by pip and uv."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archwheel.facts.arch import ArchList
from archwheel.matrix.index import CURRENT, Candidate, publish, simple_url
from tests.support.components import require
from tests.support.index_wheels import fresh_venv, pip_from_index, uv_from_index
from tests.support.paths import CACHE, ROOT

EXAMPLE = ROOT / "examples" / "cuda-kernels"
GENCODE = "-gencode arch=compute_80,code=sm_80"


def _key(nvcc: Path) -> str:
    digest = hashlib.sha256(GENCODE.encode())
    digest.update(subprocess.run([str(nvcc), "--version"], capture_output=True, check=True).stdout)
    for path in sorted(p for p in EXAMPLE.rglob("*") if p.is_file() and "build" not in p.parts):
        digest.update(str(path.relative_to(EXAMPLE)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _cuda_home(nvcc: Path) -> Path:
    """The toolkit folder: $CUDA_HOME, else /usr/local/cuda, else the one nvcc lies in (a
    wrapper script on PATH, as here, lies elsewhere)."""
    for candidate in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if candidate and (Path(candidate) / "bin" / "nvcc").is_file():
            return Path(candidate)
    return nvcc.resolve().parent.parent


@pytest.fixture(scope="module")
def example_wheel(nvcc: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example built for sm_80 by its own backend with the host's nvcc (once per key)."""
    cuda_home = _cuda_home(nvcc)
    require((cuda_home / "lib64" / "libcudart_static.a").exists(),
            f"{cuda_home} has no lib64/libcudart_static.a to link the example with")  # fmt: skip
    done = CACHE / "matrix-example" / _key(nvcc)
    done.parent.mkdir(parents=True, exist_ok=True)
    with (done.parent / ".lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if not done.exists():
            work = tmp_path_factory.mktemp("example")
            shutil.copytree(EXAMPLE, work / "src", ignore=shutil.ignore_patterns("build"))
            env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
            env.update(CUDA_HOME=str(cuda_home), CUDA_GENCODE_FLAGS=GENCODE,
                       ARCHWHEEL_EXAMPLE_BUILD_DIR=str(work / "obj"), PIP_CONFIG_FILE=os.devnull)  # fmt: skip
            subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                 "--no-index", "-w", str(work / "out"), str(work / "src")],
                check=True, env=env, timeout=1800,
            )  # fmt: skip
            (work / "out").rename(done)
    wheels = sorted(done.glob("*.whl"))
    assert len(wheels) == 1
    return wheels[0]


@pytest.mark.nvcc
def test_the_example_wheel_is_audited_published_and_installed(
    example_wheel: Path, tmp_path: Path
) -> None:
    refused = publish(
        tmp_path / "strict", [Candidate(example_wheel, expect=ArchList.parse("8.0;9.0"))]
    )
    assert not refused.published and "lacks sm_90" in refused.refused[0].reason
    assert not (tmp_path / "strict" / CURRENT).exists()

    index = tmp_path / "index"
    result = publish(index, [Candidate(example_wheel, expect=ArchList.parse("8.0"), cuda="13.0")])
    assert result.ok and [e.file for e in result.published] == [example_wheel.name]
    audit = (index / CURRENT / "wheels" / (example_wheel.name + ".audit.json")).read_text()
    assert '"sm_80"' in audit
    for installer in (pip_from_index, uv_from_index):
        python = fresh_venv(tmp_path / f"venv-{installer.__name__}")
        proc = installer(python, simple_url(index), "archwheel-example")
        assert proc.returncode == 0, proc.stderr[-2000:]
        found = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; "
             "print([str(f) for f in m.files('archwheel-example') if f.name.endswith('.so')])"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert "_kernels.so" in found
