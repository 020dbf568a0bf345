"""Fatbin compression: wheel bytes against build seconds, for each mode nvcc offers.

Two projects compiled with the host's nvcc, one call per source as a build makes them
(``8.0;9.0``, ``--threads 2`` as archwheel's builds pass it), once per mode:

- ``example``: the example recipe's seven ``csrc/*.cu`` files (CUB sorts and scans, plain
  kernels);
- ``torch-scatter``: torch-scatter 2.1.2's three CUDA sources from its sdist on the package
  index (heavily templated: every dtype x reduction), against torch 2.14.1's headers and the
  CUDA headers of its nvidia-* wheels (the tests' cached torch venv, made on first use).

Modes: ``off`` (no flag: as nvcc leaves them, ``[build] compress_fatbins = false``), then
``-Xfatbin -compress-all -compress-mode=M`` for speed (LZ4), balance, default and size (ZSTD),
and ``-compress-mode=none``. For each: the wall seconds of the calls, nvcc's own seconds of
its fatbinary phase (the ``--time`` record, wheelbuild/compile/nvcc_record.py), the objects'
bytes and those bytes zipped as a wheel stores them (deflate, zlib level 6), as a ratio to
``size`` (what ``compress_fatbins = true`` means). Every mode's objects hold the same cubins.
Run: ``nox -s bench -- compression`` (``--only=example``, ``--modes=off,size``); no Docker.
Figures: docs/maintainers/performance.md, "Fatbin compression".
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from bench_warm_call import find_nvcc  # noqa: E402

from archwheel.effects.pipconfig import PipSettings  # noqa: E402
from archwheel.effects.simple_index import fetch_page, index_urls  # noqa: E402
from archwheel.wheelbuild.compile.nvcc_record import RECORD_HEADER, parse_nvcc_record  # noqa: E402

CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
GENCODE = ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90")
MODES: dict[str, tuple[str, ...]] = {
    "off": (),
    "speed": ("-Xfatbin", "-compress-all", "-compress-mode=speed"),
    "balance": ("-Xfatbin", "-compress-all", "-compress-mode=balance"),
    "default": ("-Xfatbin", "-compress-all", "-compress-mode=default"),
    "size": ("-Xfatbin", "-compress-all", "-compress-mode=size"),
    "none": ("-compress-mode=none",),
}
SCATTER = (
    "torch-scatter",
    "2.1.2",
    "69b3aa435f2424ac6a1bfb6ff702da6eb73b33ca0db38fb26989c74159258e47",
)


@dataclass(frozen=True)
class Project:
    name: str
    folder: Path  # the calls' working folder
    sources: tuple[str, ...]
    flags: tuple[str, ...]


@dataclass(frozen=True)
class Result:
    wall_s: float
    fatbinary_s: float
    phases: dict[str, float]
    object_bytes: int
    zipped_bytes: int

    def to_json(self, size: Result | None) -> dict[str, object]:
        """The report's row, with ratios to the ``size`` mode where it ran."""
        row: dict[str, object] = {
            "wall_s": round(self.wall_s, 1), "fatbinary_s": self.fatbinary_s,
            "phases_s": self.phases, "object_bytes": self.object_bytes,
            "zipped_bytes": self.zipped_bytes,
        }  # fmt: skip
        if size is not None:
            row["zipped_vs_size"] = round(self.zipped_bytes / size.zipped_bytes, 3)
            row["wall_vs_size"] = round(self.wall_s / size.wall_s, 3)
        return row


def example() -> Project:
    csrc = ROOT / "examples" / "cuda-kernels" / "csrc"
    sources = tuple(sorted(p.name for p in csrc.glob("*.cu")))
    return Project("example", csrc, sources, ("-O3", "-std=c++17", "-Xcompiler", "-fPIC"))


def torch_scatter(tmp: Path) -> Project:
    from tests.support.venvs import torch_venv_for

    name, version, sha = SCATTER
    pip = PipSettings.from_host()
    data = None
    for index in index_urls(pip):
        for f in fetch_page(index, name, pip) or []:
            if f.filename == f"torch_scatter-{version}.tar.gz":
                with urllib.request.urlopen(f.url, timeout=120) as answer:  # noqa: S310
                    data = answer.read()
                break
        if data is not None:
            break
    if data is None or hashlib.sha256(data).hexdigest() != sha:
        raise SystemExit("bench compression: torch-scatter 2.1.2's sdist not found or changed")
    tmp.mkdir(parents=True, exist_ok=True)
    archive = tmp / "torch_scatter.tar.gz"
    archive.write_bytes(data)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
    src = tmp / f"torch_scatter-{version}"
    python = torch_venv_for("2.14.1")
    site = next((python.parent.parent / "lib").glob("python3*/site-packages"))
    torch_include = site / "torch" / "include"
    includes = [torch_include, torch_include / "torch" / "csrc" / "api" / "include"]
    includes += sorted(site.glob("nvidia/*/include"))
    includes.append(Path(sysconfig.get_paths()["include"]))
    flags = [f"-I{p}" for p in includes] + [
        # torch-scatter's define_macros, then cpp_extension's own nvcc flags (COMMON_NVCC_FLAGS)
        "-DWITH_PYTHON", "-DWITH_CUDA", "-D__CUDA_NO_HALF_OPERATORS__",
        "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
        "-D__CUDA_NO_HALF2_OPERATORS__",
        "-DTORCH_EXTENSION_NAME=_scatter_cuda", "-DTORCH_API_INCLUDE_EXTENSION_H",
        "-D_GLIBCXX_USE_CXX11_ABI=1", "--expt-relaxed-constexpr", "-O3", "-std=c++20",
        "-Xcompiler", "-fPIC", "-w",
    ]  # fmt: skip
    sources = tuple(sorted(f"csrc/cuda/{p.name}" for p in (src / "csrc" / "cuda").glob("*.cu")))
    return Project("torch-scatter", src, sources, tuple(flags))


def compile_all(nvcc: Path, project: Project, mode: str, out: Path) -> Result:
    out.mkdir(parents=True, exist_ok=True)
    record = out / "nvcc-time.csv"
    record.write_text(RECORD_HEADER)
    wall = 0.0
    objects: list[Path] = []
    for source in project.sources:
        obj = out / (Path(source).stem + ".o")
        cmd = [str(nvcc), "-c", source, "-o", str(obj), *GENCODE, "--threads", "2",
               *project.flags, *MODES[mode], "--time", str(record)]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=project.folder, capture_output=True, text=True, check=False)
        wall += time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"bench compression: {source} ({mode}): {proc.stderr.strip()[-800:]}")
        objects.append(obj)
    parsed = parse_nvcc_record(record.read_text())
    sizes = sum(o.stat().st_size for o in objects)
    zipped = out / "objects.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for o in objects:
            z.write(o, o.name)
    phases = {k: round(v, 2) for k, v in parsed.phase_seconds.items()}
    return Result(wall, phases.get("fatbinary", 0.0), phases, sizes, zipped.stat().st_size)


def main(argv: list[str]) -> int:
    only = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--only=")), None)
    modes = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--modes=")), None)
    modes = modes or list(MODES)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"bench compression: unknown mode(s) {unknown}; modes: {list(MODES)}")
    nvcc = find_nvcc()
    report: dict[str, object] = {"nvcc": str(nvcc), "archs": "8.0;9.0", "cores": os.cpu_count(),
                                 "load_before": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-compression-") as tmp_name:
        tmp = Path(tmp_name)
        projects = []
        if only is None or "example" in only:
            projects.append(example())
        if only is None or "torch-scatter" in only:
            projects.append(torch_scatter(tmp / "scatter"))
        for project in projects:
            results = {m: compile_all(nvcc, project, m, tmp / project.name / m) for m in modes}
            for mode, r in results.items():
                print(f"{project.name:14} {mode:8} wall {r.wall_s:7.1f} s  fatbinary "
                      f"{r.fatbinary_s:6.2f} s  objects {r.object_bytes:>10,} B  zipped "
                      f"{r.zipped_bytes:>10,} B", flush=True)  # fmt: skip
            report[project.name] = {"sources": len(project.sources),
                                    "modes": {m: r.to_json(results.get("size"))
                                              for m, r in results.items()}}  # fmt: skip
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2), flush=True)
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "compression.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
