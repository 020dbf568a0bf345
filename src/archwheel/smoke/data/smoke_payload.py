"""archwheel smoke payload: runs INSIDE the environment under test (stdlib + torch only).

This file never imports archwheel: it is copied into a fresh virtual environment or container
that holds only the wheels under test. It is therefore the one module of the package that starts
a process (nvidia-smi) with ``subprocess`` itself, not through ``archwheel.effects.process``, and
it spells the step list out again: ``STEPS`` must stay ``verdicts.smoke.KERNEL_STEPS`` plus
``SNIPPET_STEP`` (a unit test compares them). archwheel runs it once per step, each time in a new
process, because CUDA reads ``CUDA_DISABLE_PTX_JIT`` only when it initialises.

    python smoke_payload.py probe --result OUT.json
    python smoke_payload.py kernel STEP --device N --result OUT.json [--snippet FILE]

``probe`` records what is installed and which devices the driver shows. ``kernel`` runs one
real kernel on one device and compares it with a CPU reference. Both always write a JSON object
to ``--result`` when the interpreter survives; an exception inside a step is data, not a crash.
``--device cpu`` runs a kernel step on the CPU against the same reference: archwheel's tests use
it to prove this file works with the real torch on machines without a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAYLOAD_VERSION = 1

# Kernel steps, in the order they run. Tolerances are relative to the reference's largest
# magnitude: max|device - cpu| / max(1, max|cpu|).
STEPS = (
    "matmul_fp32",
    "matmul_fp16",
    "matmul_bf16",
    "conv2d_cudnn",
    "elementwise",
    "reduction",
    "snippet",
)
TOLERANCES = {
    "matmul_fp32": 1e-4,
    "matmul_fp16": 1e-2,
    "matmul_bf16": 4e-2,
    "conv2d_cudnn": 1e-4,
    "elementwise": 1e-5,
    "reduction": 1e-5,
}
STEP_DTYPES = {"matmul_fp16": "float16", "matmul_bf16": "bfloat16"}


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = Path(path + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(data, fh, default=str)
    tmp.replace(path)  # a reader never sees half a result


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


# --------------------------------------------------------------------------------------------
# probe


def _driver_version() -> str | None:
    """The kernel module's version (580.65.06) from procfs, else from nvidia-smi."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text(encoding="utf-8", errors="replace")
        m = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    return lines[0] if proc.returncode == 0 and lines else None


def _cuda_driver_api_version() -> int | None:
    """cuDriverGetVersion (13000 for a CUDA 13.0 driver), through ctypes; None without libcuda."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int(0)
    try:
        status = lib.cuDriverGetVersion(ctypes.byref(version))
    except AttributeError:
        return None
    return version.value if status == 0 else None


def _probe(result: str) -> int:
    data: dict[str, Any] = {
        "payload_version": PAYLOAD_VERSION,
        "python": platform.python_version(),
        "executable": sys.executable,
        "driver_version": _driver_version(),
        "cuda_driver_api_version": _cuda_driver_api_version(),
        "env": {k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES",) if k in os.environ},
    }
    try:
        import torch
    except Exception as exc:  # an import failure is the finding, not a crash
        data["torch_import_error"] = _error_text(exc)
        _write(result, data)
        return 0
    data["torch_version"] = torch.__version__
    data["torch_cuda"] = torch.version.cuda
    data["torch_git"] = getattr(torch.version, "git_version", None)
    data["arch_list"] = _safe(lambda: list(torch.cuda.get_arch_list()), [])
    data["cudnn_version"] = _safe(_cudnn_version, None)
    data["cudnn_compile_version"] = _safe(_cudnn_compile_version, None)
    data["nccl_version"] = _safe(_nccl_version, None)
    data["cuda_available"] = bool(_safe(torch.cuda.is_available, False))
    devices: list[dict[str, Any]] = []
    if data["cuda_available"]:
        try:
            for index in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(index)
                devices.append(
                    {
                        "index": index,
                        "name": props.name,
                        "cc": f"{props.major}.{props.minor}",
                        "total_memory": int(props.total_memory),
                        "multiprocessors": int(props.multi_processor_count),
                        "uuid": str(getattr(props, "uuid", "")) or None,
                    }
                )
        except Exception as exc:
            data["cuda_error"] = _error_text(exc)
    else:
        try:
            torch.cuda.init()
        except Exception as exc:
            data["cuda_error"] = _error_text(exc)
    data["devices"] = devices
    _write(result, data)
    return 0


def _safe(fn: Callable[[], Any], default: Any) -> Any:
    try:
        return fn()
    except Exception:
        return default


def _cudnn_version() -> str | None:
    import torch

    raw = torch.backends.cudnn.version()
    if raw is None:
        return None
    raw = int(raw)
    if raw >= 90000:  # cuDNN 9: major*10000 + minor*100 + patch
        return f"{raw // 10000}.{raw % 10000 // 100}.{raw % 100}"
    return f"{raw // 1000}.{raw % 1000 // 100}.{raw % 100}"


def _cudnn_compile_version() -> str | None:
    import torch

    version = torch._C._cudnn.getCompileVersion()
    return ".".join(str(v) for v in version)


def _nccl_version() -> str | None:
    import torch

    version = torch.cuda.nccl.version()
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    return str(version)


# --------------------------------------------------------------------------------------------
# kernels


def _relative_error(got: Any, want: Any) -> float:
    import torch

    got = got.detach().to("cpu", torch.float64)
    want = want.detach().to("cpu", torch.float64)
    if got.shape != want.shape:
        raise ValueError(f"shape {tuple(got.shape)} differs from the reference {tuple(want.shape)}")
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    scale = max(1.0, float(want.abs().max()))
    return float((got - want).abs().max()) / scale


def _generator(seed: int) -> Any:
    import torch

    return torch.Generator().manual_seed(seed)


def _kernel_matmul(device: Any, dtype_name: str) -> tuple[Any, Any]:
    import torch

    dtype = getattr(torch, dtype_name)
    g = _generator(1)
    a = torch.randn(256, 192, generator=g).to(dtype)
    b = torch.randn(192, 128, generator=g).to(dtype)
    want = a.to(torch.float64) @ b.to(torch.float64)  # the exact product of the same inputs
    got = a.to(device) @ b.to(device)
    return got, want


def _kernel_conv(device: Any) -> tuple[Any, Any]:
    import torch
    import torch.nn.functional as F

    g = _generator(2)
    x = torch.randn(2, 3, 32, 32, generator=g)
    w = torch.randn(8, 3, 3, 3, generator=g)
    bias = torch.randn(8, generator=g)
    want = F.conv2d(x.double(), w.double(), bias.double(), padding=1)
    got = F.conv2d(x.to(device), w.to(device), bias.to(device), padding=1)
    return got, want


def _kernel_elementwise(device: Any) -> tuple[Any, Any]:
    import torch

    g = _generator(3)
    x = torch.randn(1 << 16, generator=g)
    y = torch.randn(1 << 16, generator=g)

    def f(a: Any, b: Any) -> Any:
        return torch.sin(a) * b + torch.exp(-a.abs())

    return f(x.to(device), y.to(device)), f(x.double(), y.double())


def _kernel_reduction(device: Any) -> tuple[Any, Any]:
    import torch

    g = _generator(4)
    x = torch.rand(1 << 20, generator=g)
    dx = x.to(device)
    got = torch.stack([dx.sum() / x.numel(), dx.amax(), dx.amin()])
    xd = x.double()
    want = torch.stack([xd.sum() / x.numel(), xd.amax(), xd.amin()])
    return got, want


def _run_snippet(device: Any, snippet: str) -> None:
    import torch

    source = Path(snippet).read_text(encoding="utf-8")
    scope = {"torch": torch, "device": device, "__name__": "__archwheel_smoke__"}
    exec(compile(source, snippet, "exec"), scope)  # noqa: S102 - the recipe's own test code


def _kernel(step: str, device_arg: str, result: str, snippet: str | None) -> int:
    data: dict[str, Any] = {
        "payload_version": PAYLOAD_VERSION,
        "step": step,
        "device": device_arg,
        "ok": False,
        "error": None,
        "skipped": None,
        "tolerance": TOLERANCES.get(step),
        "max_rel_error": None,
        "env": {
            k: os.environ[k]
            for k in ("CUDA_DISABLE_PTX_JIT", "CUDA_FORCE_PTX_JIT", "CUDA_VISIBLE_DEVICES")
            if k in os.environ
        },
    }
    _write(result, data)  # so that a crash below still leaves which step it was
    try:
        import torch

        # Exact fp32 on the GPU: TF32 would be a legitimate but different answer.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        on_gpu = device_arg != "cpu"
        device = torch.device(f"cuda:{int(device_arg)}" if on_gpu else "cpu")
        if on_gpu:
            torch.cuda.set_device(device)
            data["device_name"] = torch.cuda.get_device_name(device)
        if step == "matmul_bf16" and on_gpu and not torch.cuda.is_bf16_supported():
            data["skipped"] = "the device does not support bfloat16"
            _write(result, data)
            return 0
        if step == "conv2d_cudnn":
            data["cudnn_enabled"] = bool(torch.backends.cudnn.enabled) and bool(
                torch.backends.cudnn.is_available()
            )
        if step == "snippet":
            if not snippet:
                data["skipped"] = "no smoke snippet given"
                _write(result, data)
                return 0
            _run_snippet(device, snippet)
            if on_gpu:
                torch.cuda.synchronize(device)
            data["ok"] = True
            _write(result, data)
            return 0
        if step in STEP_DTYPES:
            got, want = _kernel_matmul(device, STEP_DTYPES[step])
        elif step == "matmul_fp32":
            got, want = _kernel_matmul(device, "float32")
        elif step == "conv2d_cudnn":
            got, want = _kernel_conv(device)
        elif step == "elementwise":
            got, want = _kernel_elementwise(device)
        elif step == "reduction":
            got, want = _kernel_reduction(device)
        else:
            raise ValueError(f"unknown step {step!r}")
        if on_gpu:
            torch.cuda.synchronize(device)  # asynchronous launch errors surface here
        error = _relative_error(got, want)
        data["ok"] = error <= TOLERANCES[step]
        if math.isfinite(error):
            data["max_rel_error"] = error
        if not data["ok"]:
            data["mismatch"] = (
                f"max relative error {error:.3g} exceeds the tolerance {TOLERANCES[step]:g}"
                if math.isfinite(error)
                else "the result holds NaN or infinite values"
            )
    except Exception as exc:
        data["error"] = _error_text(exc)
        data["traceback_tail"] = traceback.format_exc().strip().splitlines()[-6:]
    _write(result, data)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the ``probe`` or one ``kernel`` step inside the tested environment; what it found goes
    to the ``--result`` file, which the watchdog reads."""
    parser = argparse.ArgumentParser(prog="smoke_payload")
    sub = parser.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("probe")
    probe.add_argument("--result", required=True)
    kernel = sub.add_parser("kernel")
    kernel.add_argument("step", choices=STEPS)
    kernel.add_argument("--device", required=True)
    kernel.add_argument("--result", required=True)
    kernel.add_argument("--snippet")
    args = parser.parse_args(argv)
    if args.command == "probe":
        return _probe(args.result)
    return _kernel(args.step, args.device, args.result, args.snippet)


if __name__ == "__main__":
    sys.exit(main())
