"""A tiny in-tree PEP 517 build backend for the archwheel example CUDA extension.

It needs nothing beyond the standard library, nvcc and g++: it compiles every ``csrc/*.cu``
into an object (in parallel, longest first), links ``archwheel_example/_kernels.so`` with the
host compiler and the static CUDA runtime, and writes a wheel whose bytes depend only on the
inputs (sorted entries, fixed timestamps from ``SOURCE_DATE_EPOCH``, fixed permissions).

Environment (all optional):

``CUDA_GENCODE_FLAGS``
    nvcc ``-gencode`` flags, whitespace-separated: the arch list. Default: sm_80 SASS.
``CUDA_HOME``
    toolkit root holding ``bin/nvcc`` (default ``/usr/local/cuda``).
``MAX_JOBS``
    parallel nvcc processes (default: CPU count).
``NVCC_LAUNCHER``
    a compiler launcher put in front of nvcc, e.g. ``ccache``.
``NVCC_EXTRA_FLAGS``
    more nvcc flags, e.g. ``-Xfatbin -compress-all``.
``CXX``
    the host compiler that links the library (default ``g++``).
``ARCHWHEEL_EXAMPLE_BUILD_DIR``
    where objects go (default ``build/`` in the source tree).

Each compile prints ``[i/N] nvcc FILE`` so a progress display can follow the build.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shlex
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NAME = "archwheel_example"
DIST_NAME = "archwheel-example"
VERSION = "0.1.0"
TAG = "py3-none-linux_x86_64"
SOURCE_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_GENCODE = "-gencode=arch=compute_80,code=sm_80"
ZIP_EPOCH_MIN = 315532800  # 1980-01-01, the earliest time a zip entry can hold

METADATA = f"""\
Metadata-Version: 2.1
Name: {DIST_NAME}
Version: {VERSION}
Summary: archwheel's example CUDA extension: axpy, activations, reductions, tiled matmul, \
radix sort and scan, loaded with ctypes
License: Apache-2.0
Requires-Python: >=3.8
"""

WHEEL = f"""\
Wheel-Version: 1.0
Generator: archwheel-example-backend {VERSION}
Root-Is-Purelib: false
Tag: {TAG}
"""


# -- PEP 517 hooks ------------------------------------------------------------------------------
def get_requires_for_build_wheel(config_settings: dict[str, str] | None = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: dict[str, str] | None = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: dict[str, str] | None = None
) -> str:
    dist_info = Path(metadata_directory) / f"{NAME}-{VERSION}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(METADATA)
    (dist_info / "WHEEL").write_text(WHEEL)
    return dist_info.name


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, str] | None = None,
    metadata_directory: str | None = None,
) -> str:
    library = _compile_and_link()
    wheel_name = f"{NAME}-{VERSION}-{TAG}.whl"
    files: dict[str, tuple[bytes, bool]] = {}
    for py in sorted((SOURCE_ROOT / "src" / NAME).glob("*.py")):
        files[f"{NAME}/{py.name}"] = (py.read_bytes(), False)
    files[f"{NAME}/_kernels.so"] = (library.read_bytes(), True)
    _write_wheel(Path(wheel_directory) / wheel_name, files)
    return wheel_name


def build_sdist(sdist_directory: str, config_settings: dict[str, str] | None = None) -> str:
    import tarfile

    base = f"{NAME}-{VERSION}"
    out = Path(sdist_directory) / f"{base}.tar.gz"
    mtime = _source_date_epoch()
    wanted = ["pyproject.toml", "README.md"]
    wanted += [str(p.relative_to(SOURCE_ROOT)) for p in sorted(SOURCE_ROOT.glob("csrc/*"))]
    wanted += [str(p.relative_to(SOURCE_ROOT)) for p in sorted(SOURCE_ROOT.glob("backend/*.py"))]
    wanted += [str(p.relative_to(SOURCE_ROOT)) for p in sorted(SOURCE_ROOT.glob("src/*/*.py"))]
    with tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in wanted:
            info = tar.gettarinfo(str(SOURCE_ROOT / rel), arcname=f"{base}/{rel}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "", ""
            with (SOURCE_ROOT / rel).open("rb") as handle:
                tar.addfile(info, handle)
        pkg_info = tarfile.TarInfo(f"{base}/PKG-INFO")
        pkg_info.size, pkg_info.mtime, pkg_info.mode = len(METADATA.encode()), mtime, 0o644
        tar.addfile(pkg_info, io.BytesIO(METADATA.encode()))
    return out.name


# -- compiling ----------------------------------------------------------------------------------
def _compile_and_link() -> Path:
    cuda_home = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    nvcc = cuda_home / "bin" / "nvcc"
    if not nvcc.is_file():
        raise SystemExit(f"archwheel-example: nvcc not found at {nvcc} (set CUDA_HOME)")
    launcher = shlex.split(os.environ.get("NVCC_LAUNCHER", ""))
    gencode = shlex.split(os.environ.get("CUDA_GENCODE_FLAGS") or DEFAULT_GENCODE)
    extra = shlex.split(os.environ.get("NVCC_EXTRA_FLAGS", ""))
    build_dir = Path(os.environ.get("ARCHWHEEL_EXAMPLE_BUILD_DIR") or SOURCE_ROOT / "build")
    obj_dir = build_dir / "obj"
    obj_dir.mkdir(parents=True, exist_ok=True)
    jobs = max(1, int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1))

    sources = sorted((SOURCE_ROOT / "csrc").glob("*.cu"))
    # Longest first (by size, a fair proxy here) so the heavy CUB files never run last alone.
    order = sorted(sources, key=lambda p: (-p.stat().st_size, p.name))
    common = [
        "-O3",
        "-std=c++17",
        "-Xcompiler=-fPIC,-fvisibility=hidden",
        # Intermediate files next to the object, not /tmp/tmpxft_<pid>_...: the pid would
        # otherwise land in the object's symbol table and make every build differ.
        "-objtemp",
        f"-I{SOURCE_ROOT / 'csrc'}",
        *gencode,
        *extra,
    ]
    print(f"archwheel-example: {len(sources)} sources, {jobs} jobs, flags: {shlex.join(gencode)}")
    sys.stdout.flush()
    counter = iter(range(1, len(order) + 1))

    def compile_one(source: Path) -> Path:
        obj = obj_dir / (source.stem + ".o")
        cmd = [*launcher, str(nvcc), "-c", str(source), "-o", str(obj), *common]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        index = next(counter)
        took = time.monotonic() - start
        print(f"[{index}/{len(order)}] nvcc {source.name} ({took:.1f} s)", flush=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise SystemExit(f"archwheel-example: nvcc failed on {source.name}")
        return obj

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        objects = list(pool.map(compile_one, order))
    library = build_dir / "_kernels.so"
    # Linked by the host compiler, as CMake and torch.utils.cpp_extension do without -rdc:
    # `nvcc -shared` would also run a device link for its default arch and embed an empty
    # sm_75 cubin that nobody asked for. The static CUDA runtime stays private to the library.
    cxx = shlex.split(os.environ.get("CXX") or "g++")
    link = [
        *cxx, "-shared", "-o", str(library), *sorted(map(str, objects)),
        f"-L{cuda_home / 'lib64'}", "-Wl,--exclude-libs,ALL", "-Wl,--start-group",
        "-lcudart_static", "-lrt", "-lpthread", "-ldl", "-Wl,--end-group",
    ]  # fmt: skip
    print(f"link {library.name}", flush=True)
    subprocess.run(link, check=True)
    return library


# -- packaging ----------------------------------------------------------------------------------
def _source_date_epoch() -> int:
    return max(ZIP_EPOCH_MIN, int(os.environ.get("SOURCE_DATE_EPOCH") or ZIP_EPOCH_MIN))


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _write_wheel(path: Path, files: dict[str, tuple[bytes, bool]]) -> None:
    dist_info = f"{NAME}-{VERSION}.dist-info"
    entries = dict(sorted(files.items()))
    entries[f"{dist_info}/METADATA"] = (METADATA.encode(), False)
    entries[f"{dist_info}/WHEEL"] = (WHEEL.encode(), False)
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, (d, _) in entries.items())
    record += f"{dist_info}/RECORD,,\n"
    entries[f"{dist_info}/RECORD"] = (record.encode(), False)
    stamp = time.gmtime(_source_date_epoch())[:6]
    with zipfile.ZipFile(path, "w") as archive:
        for name, (data, executable) in entries.items():
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            archive.writestr(info, data)
