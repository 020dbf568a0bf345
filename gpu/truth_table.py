"""The GPU truth table: which image really serves a kernel, natively or through the PTX JIT.

    python3 gpu/truth_table.py build --out gpu/build [--nvcc PATH]    (here, with nvcc 13)
    python3 gpu/truth_table.py table --build gpu/build --out DIR       (on the GPU machine)
    python3 gpu/truth_table.py run-one --case 9.0 --route fatbin --build gpu/build --result F

``build`` compiles gpu/probe_kernel.cu once per case (arch list spelled as a user writes it,
turned into -gencode flags by archwheel's ArchList) into a fatbin and a shared library.
``table`` runs every case x route x mode, each in its own process (CUDA reads
CUDA_DISABLE_PTX_JIT / CUDA_FORCE_PTX_JIT once, at initialisation), under a time limit, and
compares what happened with the expectation written out from cuda-facts.md section 2, with
archwheel's rules (facts.rules through smoke's arch-list check) and with ``archwheel can-run``
where that command exists. ``run-one`` is the child: stdlib and ctypes only, no torch.

Modes: ``native`` (CUDA_DISABLE_PTX_JIT=1), ``default`` (neither variable), ``force``
(CUDA_FORCE_PTX_JIT=1). A case's verdict comes from native and default: native ok -> native;
native fails and default ok -> jit-only; both fail -> no-kernel-image.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "probe_kernel.cu"
KERNEL = b"archwheel_probe"
N = 1024
EXIT_NO_DEVICE = 20  # as archwheel smoke
EXIT_MISMATCH = 1

# (case, arch list as a user writes it, file stem). The first six are issue 5's cases.
CASES: tuple[tuple[str, str, str], ...] = (
    ("8.0", "8.0", "sm80"),
    ("8.0+PTX", "8.0+PTX", "sm80_ptx"),
    ("9.0", "9.0", "sm90"),
    ("9.0a", "9.0a", "sm90a"),
    ("10.0", "10.0", "sm100"),
    ("12.0+PTX", "12.0+PTX", "sm120_ptx"),
    ("compute_90", "compute_90", "ptx90"),
    ("9.0+PTX", "9.0+PTX", "sm90_ptx"),
)
ROUTES = ("fatbin", "runtime")
MODES: dict[str, dict[str, str]] = {
    "native": {"CUDA_DISABLE_PTX_JIT": "1"},
    "default": {},
    "force": {"CUDA_FORCE_PTX_JIT": "1"},
}

# Written out by hand from cuda-facts.md section 2 for a compute capability 9.0 GPU (H200):
# (verdict, __CUDA_ARCH__ seen in default mode, does CUDA_FORCE_PTX_JIT=1 run it).
# sm_XY cubins run on the same major with minor >= Y; 'a' cubins on exactly X.Y; PTX compute_XY
# is JIT-compiled for any GPU >= X.Y. compute_120 PTX is newer than 9.0: no image at all.
EXPECTED_ON_9_0: dict[str, tuple[str, int | None, bool]] = {
    "8.0": ("no-kernel-image", None, False),
    "8.0+PTX": ("jit-only", 800, True),
    "9.0": ("native", 900, False),
    "9.0a": ("native", 900, False),
    "10.0": ("no-kernel-image", None, False),
    "12.0+PTX": ("no-kernel-image", None, False),
    "compute_90": ("jit-only", 900, True),
    "9.0+PTX": ("native", 900, True),
}


# --------------------------------------------------------------------------------------------
# build (here, with nvcc)


def build(out: Path, nvcc: str) -> int:
    from archwheel.facts.arch import ArchList

    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"nvcc": _nvcc_version(nvcc), "cases": {}}
    for case, spelling, stem in CASES:
        flags = ArchList.parse(spelling).to_gencode()
        fatbin = out / f"{stem}.fatbin"
        library = out / f"libprobe_{stem}.so"
        _run([nvcc, "-fatbin", *flags, str(SOURCE), "-o", str(fatbin)])
        _run([nvcc, "-shared", "-Xcompiler", "-fPIC", *flags, str(SOURCE), "-o", str(library)])
        manifest["cases"][case] = {
            "arch_list": spelling,
            "gencode": flags,
            "fatbin": fatbin.name,
            "library": library.name,
            "images": _images(flags),
        }
        print(f"built {case:10} {' '.join(flags)}", flush=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return 0


def _images(flags: list[str]) -> list[str]:
    """The image names the gencode flags produce: sm_90a, compute_80 ..."""
    names = []
    for flag in flags:
        code = flag.rsplit(",code=", 1)[1]
        names.append(code)
    return names


def _nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "?"


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"build failed: {' '.join(argv)}\n{proc.stderr.strip()}")


# --------------------------------------------------------------------------------------------
# run-one (the child; stdlib + ctypes only)


class CudaCallError(Exception):
    def __init__(self, stage: str, code: int, name: str, text: str) -> None:
        super().__init__(f"{stage}: {name}: {text}")
        self.stage, self.code, self.name, self.text = stage, code, name, text


def _driver() -> Any:
    return ctypes.CDLL("libcuda.so.1")


def _check(cuda: Any, stage: str, status: int) -> None:
    if status == 0:
        return
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    cuda.cuGetErrorName(status, ctypes.byref(name))
    cuda.cuGetErrorString(status, ctypes.byref(text))
    raise CudaCallError(
        stage,
        status,
        (name.value or b"?").decode(),
        (text.value or b"?").decode(),
    )


def _device_info(cuda: Any) -> dict[str, Any]:
    _check(cuda, "cuInit", cuda.cuInit(0))
    dev = ctypes.c_int()
    _check(cuda, "cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(dev), 0))
    major, minor, version = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _check(cuda, "attr", cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev))
    _check(cuda, "attr", cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev))
    _check(cuda, "cuDriverGetVersion", cuda.cuDriverGetVersion(ctypes.byref(version)))
    name = ctypes.create_string_buffer(256)
    _check(cuda, "cuDeviceGetName", cuda.cuDeviceGetName(name, 256, dev))
    return {
        "device": dev.value,
        "name": name.value.decode(),
        "cc": f"{major.value}.{minor.value}",
        "cuda_driver_api_version": version.value,
    }


def _run_fatbin(path: Path) -> dict[str, Any]:
    cuda = _driver()
    info = _device_info(cuda)
    ctx = ctypes.c_void_p()
    _check(cuda, "cuDevicePrimaryCtxRetain", cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0))
    _check(cuda, "cuCtxSetCurrent", cuda.cuCtxSetCurrent(ctx))
    image = ctypes.create_string_buffer(path.read_bytes())
    module, fn = ctypes.c_void_p(), ctypes.c_void_p()
    _check(cuda, "cuModuleLoadData", cuda.cuModuleLoadData(ctypes.byref(module), image))
    _check(cuda, "cuModuleGetFunction", cuda.cuModuleGetFunction(ctypes.byref(fn), module, KERNEL))
    out, arch = ctypes.c_uint64(), ctypes.c_uint64()
    _check(cuda, "cuMemAlloc", cuda.cuMemAlloc_v2(ctypes.byref(out), N * 4))
    _check(cuda, "cuMemAlloc", cuda.cuMemAlloc_v2(ctypes.byref(arch), 4))
    _check(cuda, "cuMemsetD32", cuda.cuMemsetD32_v2(arch, 0, 1))
    n = ctypes.c_int(N)
    args = (ctypes.c_void_p * 3)(
        ctypes.cast(ctypes.byref(out), ctypes.c_void_p),
        ctypes.cast(ctypes.byref(n), ctypes.c_void_p),
        ctypes.cast(ctypes.byref(arch), ctypes.c_void_p),
    )
    status = cuda.cuLaunchKernel(fn, N // 256, 1, 1, 256, 1, 1, 0, None, args, None)
    _check(cuda, "cuLaunchKernel", status)
    _check(cuda, "cuCtxSynchronize", cuda.cuCtxSynchronize())
    host = (ctypes.c_int * N)()
    seen_arch = ctypes.c_int()
    _check(cuda, "cuMemcpyDtoH", cuda.cuMemcpyDtoH_v2(host, out, N * 4))
    _check(cuda, "cuMemcpyDtoH", cuda.cuMemcpyDtoH_v2(ctypes.byref(seen_arch), arch, 4))
    bad = sum(1 for i in range(N) if host[i] != 3 * i + 1)
    return {**info, "ok": bad == 0, "cuda_arch": seen_arch.value, "bad_values": bad}


def _run_runtime(path: Path) -> dict[str, Any]:
    # The runtime route launches even when the driver API cannot be asked about the device:
    # then cudart's own error for the situation is the evidence (on a machine without a
    # driver it says cudaErrorInsufficientDriver).
    try:
        info = _device_info(_driver())
    except (CudaCallError, OSError) as exc:
        info = {"device_info_error": f"{type(exc).__name__}: {exc}"}
    lib = ctypes.CDLL(str(path.resolve()))
    arch, bad = ctypes.c_int(), ctypes.c_int()
    message = ctypes.create_string_buffer(512)
    status = lib.archwheel_probe_launch(ctypes.byref(arch), ctypes.byref(bad), message, 512)
    text = message.value.decode(errors="replace")
    if status != 0:
        name, _, rest = text.partition(": ")
        raise CudaCallError("archwheel_probe_launch", status, name, rest)
    return {**info, "ok": bad.value == 0, "cuda_arch": arch.value, "bad_values": bad.value}


def run_one(case: str, route: str, build_dir: Path, result: Path) -> int:
    stem = {c: s for c, _, s in CASES}[case]
    path = build_dir / (f"{stem}.fatbin" if route == "fatbin" else f"libprobe_{stem}.so")
    data: dict[str, Any] = {"case": case, "route": route, "ok": False, "file": path.name}
    data["env"] = {k: os.environ[k] for k in ("CUDA_DISABLE_PTX_JIT", "CUDA_FORCE_PTX_JIT")
                   if k in os.environ}  # fmt: skip
    started = time.monotonic()
    try:
        data.update(_run_fatbin(path) if route == "fatbin" else _run_runtime(path))
    except CudaCallError as exc:
        data.update(stage=exc.stage, code=exc.code, error=f"{exc.name}: {exc.text}")
    except OSError as exc:  # libcuda.so.1 missing: no driver on this machine
        data.update(stage="load", code=None, error=f"{type(exc).__name__}: {exc}")
    data["seconds"] = round(time.monotonic() - started, 3)
    result.write_text(json.dumps(data))
    return 0


# --------------------------------------------------------------------------------------------
# table (the parent)


def _attempt(case: str, route: str, mode: str, build_dir: Path, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="archwheel-tt-") as scratch:
        result = Path(scratch) / "result.json"
        return _attempt_in(case, route, mode, build_dir=build_dir, timeout=timeout, result=result)


def _attempt_in(
    case: str, route: str, mode: str, *, build_dir: Path, timeout: float, result: Path
) -> dict[str, Any]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_DISABLE_PTX_JIT", "CUDA_FORCE_PTX_JIT")
    }
    env.update(MODES[mode])
    argv = [sys.executable, str(Path(__file__).resolve()), "run-one", "--case", case,
            "--route", route, "--build", str(build_dir), "--result", str(result)]  # fmt: skip
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False, start_new_session=True)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"case": case, "route": route, "mode": mode, "ok": False, "status": "hang",
                "error": f"did not finish within {timeout:g} s"}  # fmt: skip
    if proc.returncode != 0 or not result.exists():
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return {"case": case, "route": route, "mode": mode, "ok": False, "status": "crash",
                "error": f"exit {proc.returncode}: {tail[0]}"}  # fmt: skip
    data: dict[str, Any] = json.loads(result.read_text())
    data.update(mode=mode, status="ran")
    return data


def _observed_verdict(native: dict[str, Any], default: dict[str, Any]) -> str:
    if native.get("ok"):
        return "native"
    if default.get("ok"):
        return "jit-only"
    return "no-kernel-image"


def _rules_verdict(images: list[str], cc: str) -> str | None:
    """archwheel's own rules (the arch-list check smoke uses) for these images on ``cc``."""
    try:
        from archwheel.facts.versions import ComputeCapability
        from archwheel.verdicts.smoke import check_arch_list
    except ImportError:
        return None
    check = check_arch_list(images, ComputeCapability.parse(cc))
    return {"native": "native", "jit": "jit-only"}.get(check.verdict, "no-kernel-image")


def _failure_class(error: str | None) -> str | None:
    try:
        from archwheel.verdicts.smoke import classify_cuda_error
    except ImportError:
        return None
    failure = classify_cuda_error(error)
    return failure.value if failure else None


def _can_run(path: Path, cc: str) -> dict[str, Any]:
    """``archwheel can-run --cc CC FILE --format json``, as far as that command exists."""
    argv = [sys.executable, "-m", "archwheel.interfaces.cli", "can-run", "--cc", cc,
            "--format", "json", str(path)]  # fmt: skip
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"available": False, "why": str(exc)}
    if "invalid choice: 'can-run'" in proc.stderr or "No module named" in proc.stderr:
        return {"available": False, "why": proc.stderr.strip().splitlines()[-1][:200]}
    verdict = None
    try:
        document = json.loads(proc.stdout)
        verdict = _find_verdict(document)
    except json.JSONDecodeError:
        pass
    return {"available": True, "exit_code": proc.returncode, "verdict": verdict,
            "stdout_head": proc.stdout[:400], "stderr_tail": proc.stderr[-300:]}  # fmt: skip


def _find_verdict(document: Any) -> str | None:
    """The wheel-level verdict word in can-run's JSON, wherever it sits (native/jit/missing)."""
    words = {"native": "native", "jit": "jit-only", "jit-only": "jit-only",
             "no-kernel-image": "no-kernel-image", "missing": "no-kernel-image"}  # fmt: skip
    if isinstance(document, dict):
        for key in ("verdict", "overall", "result"):
            value = document.get(key)
            if isinstance(value, str) and value.lower() in words:
                return words[value.lower()]
        for value in document.values():
            found = _find_verdict(value)
            if found:
                return found
    if isinstance(document, list):
        for value in document:
            found = _find_verdict(value)
            if found:
                return found
    return None


def table(build_dir: Path, out: Path, timeout: float, jobs: int = 8) -> int:
    manifest = json.loads((build_dir / "manifest.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    first = _attempt(CASES[2][0], "fatbin", "default", build_dir, timeout)
    document: dict[str, Any] = {
        "schema_version": 1,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": platform.node(),
        "python": platform.python_version(),
        "nvcc": manifest.get("nvcc"),
        "device": {k: first.get(k) for k in ("name", "cc", "cuda_driver_api_version")},
        "driver": _driver_version(),
        "rows": [],
    }
    if first.get("stage") in ("load", "cuInit", "cuDeviceGet"):
        document["no_device"] = first.get("error")
        _write(out, document)
        print(f"no CUDA device: {first.get('error')}")
        return EXIT_NO_DEVICE
    cc = str(first.get("cc"))
    # Every attempt is its own process; they run side by side (each has its own CUDA context).
    keys = [(case, route, mode) for case, _, _ in CASES for route in ROUTES for mode in MODES]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {k: pool.submit(_attempt, *k, build_dir, timeout) for k in keys}
        results = {k: f.result() for k, f in futures.items()}
    mismatches = 0
    for case, _spelling, _stem in CASES:
        info = manifest["cases"][case]
        expected = EXPECTED_ON_9_0.get(case) if cc == "9.0" else None
        rules = _rules_verdict(info["images"], cc)
        for route in ROUTES:
            attempts = {m: results[(case, route, m)] for m in MODES}
            for attempt in attempts.values():
                attempt["failure"] = _failure_class(attempt.get("error"))
            observed = _observed_verdict(attempts["native"], attempts["default"])
            file = build_dir / (info["fatbin"] if route == "fatbin" else info["library"])
            can_run = _can_run(file, cc)
            row = {
                "case": case,
                "route": route,
                "images": info["images"],
                "observed": observed,
                "cuda_arch_default": attempts["default"].get("cuda_arch"),
                "force_ptx_jit_ran": bool(attempts["force"].get("ok")),
                "expected": expected[0] if expected else None,
                "expected_cuda_arch": expected[1] if expected else None,
                "expected_force_ran": expected[2] if expected else None,
                "rules": rules,
                "can_run": can_run,
                "attempts": attempts,
            }
            row["agrees"] = _agrees(row)
            mismatches += not row["agrees"]
            document["rows"].append(row)
            print(f"{case:11} {route:8} observed {observed:16} expected {row['expected']} "
                  f"rules {rules} can-run {can_run.get('verdict')}", flush=True)  # fmt: skip
    document["mismatches"] = mismatches
    _write(out, document)
    return EXIT_MISMATCH if mismatches else 0


def _agrees(row: dict[str, Any]) -> bool:
    checks = [row["observed"] == row["rules"]] if row["rules"] else []
    if row["expected"] is not None:
        checks.append(row["observed"] == row["expected"])
        if row["expected_cuda_arch"] is not None:
            checks.append(row["cuda_arch_default"] == row["expected_cuda_arch"])
        checks.append(row["force_ptx_jit_ran"] == row["expected_force_ran"])
    if row["can_run"].get("verdict"):
        checks.append(row["can_run"]["verdict"] == row["observed"])
    return all(checks)


def _driver_version() -> str | None:
    """The kernel module's version from procfs, else from nvidia-smi (not in every sandbox)."""
    try:
        for word in Path("/proc/driver/nvidia/version").read_text().split():
            if word.count(".") >= 1 and word.replace(".", "").isdigit():
                return word
    except OSError:
        pass
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.split()
    return lines[0] if proc.returncode == 0 and lines else None


def _write(out: Path, document: dict[str, Any]) -> None:
    (out / "truth_table.json").write_text(json.dumps(document, indent=2))
    (out / "truth_table.md").write_text(render_markdown(document))


def render_markdown(document: dict[str, Any]) -> str:
    device = document.get("device") or {}
    lines = [
        f"# GPU truth table: {device.get('name') or 'no device'} (cc {device.get('cc')})",
        "",
        f"Date: {document.get('date')}; driver {document.get('driver')} (CUDA driver API "
        f"{device.get('cuda_driver_api_version')}); kernels built with {document.get('nvcc')}; "
        f"python {document.get('python')}.",
        "",
    ]
    if document.get("no_device"):
        lines += [f"No CUDA device: {document['no_device']}", ""]
        return "\n".join(lines)
    lines += [
        "Verdict from two processes per row: `CUDA_DISABLE_PTX_JIT=1` (native) and no variable "
        "(JIT allowed). `__CUDA_ARCH__` is what the kernel saw in the second; *force* is a third "
        "process with `CUDA_FORCE_PTX_JIT=1`.",
        "",
        "| case | route | images | observed | expected | rules | can-run | __CUDA_ARCH__ | "
        "force JIT ran | native error | agrees |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in document.get("rows", []):
        native_error = row["attempts"]["native"].get("error") or ""
        can_run = row["can_run"]
        can_run_text = can_run.get("verdict") or ("n/a" if not can_run.get("available") else "?")
        lines.append(
            f"| {row['case']} | {row['route']} | {' '.join(row['images'])} | "
            f"**{row['observed']}** | {row['expected']} | {row['rules']} | {can_run_text} | "
            f"{row['cuda_arch_default']} | {row['force_ptx_jit_ran']} | {native_error} | "
            f"{'yes' if row['agrees'] else '**NO**'} |"
        )
    lines += ["", f"Rows that disagree: {document.get('mismatches')}", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="truth_table")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    t = sub.add_parser("table")
    t.add_argument("--build", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--timeout", type=float, default=60)
    t.add_argument("--jobs", type=int, default=8, help="attempts run side by side")
    r = sub.add_parser("run-one")
    r.add_argument("--case", required=True, choices=[c for c, _, _ in CASES])
    r.add_argument("--route", required=True, choices=ROUTES)
    r.add_argument("--build", type=Path, required=True)
    r.add_argument("--result", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "build":
        return build(args.out, args.nvcc)
    if args.command == "table":
        return table(args.build, args.out, args.timeout, args.jobs)
    return run_one(args.case, args.route, args.build, args.result)


if __name__ == "__main__":
    sys.exit(main())
