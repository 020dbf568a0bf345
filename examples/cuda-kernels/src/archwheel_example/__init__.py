"""archwheel's example CUDA extension: real kernels behind a tiny Python API.

The kernels live in ``_kernels.so`` (built by nvcc for the requested arch list, CUDA runtime
linked statically) and are loaded with ctypes, so the wheel needs neither torch nor Python
headers. Every function copies its inputs to the GPU, runs one kernel family and copies the
result back; a CUDA failure raises ``CudaError`` with the runtime's message, e.g. "no kernel
image is available for execution on the device" on a GPU the wheel was not built for.
"""

from __future__ import annotations

import ctypes
import functools
import struct
from array import array
from collections.abc import Sequence
from pathlib import Path

__version__ = "0.1.0"
__all__ = [
    "CudaError",
    "activation",
    "argsort",
    "axpy",
    "cumsum",
    "device_capability",
    "device_count",
    "driver_version",
    "kernel_arch",
    "matmul",
    "reduce_max",
    "reduce_sum",
    "runtime_version",
    "sort",
]

_ACTIVATIONS = {"relu": 0, "gelu": 1, "sigmoid": 2}

# dtype name -> (array typecode, ctypes type, C suffix)
_DTYPES = {
    "float16": ("H", ctypes.c_ushort, "f16"),
    "float32": ("f", ctypes.c_float, "f32"),
    "float64": ("d", ctypes.c_double, "f64"),
    "int32": ("i", ctypes.c_int, "i32"),
    "int64": ("q", ctypes.c_longlong, "i64"),
}


class CudaError(RuntimeError):
    """A CUDA runtime call failed; ``status`` is the cudaError_t value."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"CUDA error {status}: {message}")
        self.status = status


@functools.cache
def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(Path(__file__).with_name("_kernels.so")))
    lib.awx_error_string.restype = ctypes.c_char_p
    lib.awx_error_string.argtypes = [ctypes.c_int]
    return lib


def _check(status: int) -> None:
    if status != 0:
        message = _library().awx_error_string(status) or b"unknown error"
        raise CudaError(status, message.decode(errors="replace"))


def _dtype(dtype: str, allowed: Sequence[str]) -> tuple[str, type, str]:
    if dtype not in allowed:
        raise ValueError(f"dtype {dtype!r} not supported here; use one of {', '.join(allowed)}")
    return _DTYPES[dtype]


def _to_array(values: Sequence[float] | Sequence[int], dtype: str) -> array:
    if dtype == "float16":
        return array("H", [struct.unpack("<H", struct.pack("<e", float(v)))[0] for v in values])
    return array(_DTYPES[dtype][0], values)


def _from_array(data: array, dtype: str) -> list:
    if dtype == "float16":
        return [struct.unpack("<e", struct.pack("<H", v))[0] for v in data]
    return list(data)


def _pointer(data: array, ctype: type) -> object:
    if len(data) == 0:
        return ctypes.cast(None, ctypes.POINTER(ctype))
    return (ctype * len(data)).from_buffer(data)


# -- device information -------------------------------------------------------------------------
def device_count() -> int:
    count = ctypes.c_int(0)
    _check(_library().awx_device_count(ctypes.byref(count)))
    return count.value


def device_capability(device: int = 0) -> tuple[int, int]:
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    _check(_library().awx_device_capability(device, ctypes.byref(major), ctypes.byref(minor)))
    return major.value, minor.value


def runtime_version() -> int:
    """The CUDA runtime this library was linked with, e.g. 13000."""
    version = ctypes.c_int(0)
    _check(_library().awx_runtime_version(ctypes.byref(version)))
    return version.value


def driver_version() -> int:
    """The CUDA version the installed driver supports, e.g. 13000 (0 without a driver)."""
    version = ctypes.c_int(0)
    _check(_library().awx_driver_version(ctypes.byref(version)))
    return version.value


def kernel_arch() -> int:
    """``__CUDA_ARCH__`` of the image a kernel ran from on device 0 (900 = sm_90 or compute_90)."""
    arch = ctypes.c_int(0)
    _check(_library().awx_kernel_arch(ctypes.byref(arch)))
    return arch.value


# -- kernels ------------------------------------------------------------------------------------
def axpy(a: float, x: Sequence[float], y: Sequence[float], dtype: str = "float32") -> list:
    """``a * x + y`` element-wise."""
    _code, ctype, suffix = _dtype(dtype, ("float16", "float32", "float64"))
    if len(x) != len(y):
        raise ValueError(f"x and y differ in length ({len(x)} != {len(y)})")
    xs, ys = _to_array(x, dtype), _to_array(y, dtype)
    scalar = _to_array([a], dtype)[0]
    fn = getattr(_library(), f"awx_axpy_{suffix}")
    fn.argtypes = [ctypes.c_size_t, ctype, ctypes.POINTER(ctype), ctypes.POINTER(ctype)]
    _check(fn(len(xs), scalar, _pointer(xs, ctype), _pointer(ys, ctype)))
    return _from_array(ys, dtype)


def activation(name: str, x: Sequence[float], dtype: str = "float32") -> list:
    """``relu``, ``gelu`` (tanh approximation) or ``sigmoid`` element-wise."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; use one of {', '.join(_ACTIVATIONS)}")
    _code, ctype, suffix = _dtype(dtype, ("float16", "float32", "float64"))
    xs = _to_array(x, dtype)
    ys = _to_array([0] * len(xs), dtype)
    fn = getattr(_library(), f"awx_activation_{suffix}")
    fn.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(ctype), ctypes.POINTER(ctype)]
    _check(fn(_ACTIVATIONS[name], len(xs), _pointer(xs, ctype), _pointer(ys, ctype)))
    return _from_array(ys, dtype)


def _reduce(op: str, x: Sequence[float] | Sequence[int], dtype: str) -> float | int:
    _code, ctype, suffix = _dtype(dtype, ("float32", "float64", "int32", "int64"))
    xs = _to_array(x, dtype)
    out = _to_array([0], dtype)
    fn = getattr(_library(), f"awx_{op}_{suffix}")
    fn.argtypes = [ctypes.c_size_t, ctypes.POINTER(ctype), ctypes.POINTER(ctype)]
    _check(fn(len(xs), _pointer(xs, ctype), _pointer(out, ctype)))
    value: float | int = out[0]
    return value


def reduce_sum(x: Sequence[float] | Sequence[int], dtype: str = "float32") -> float | int:
    return _reduce("sum", x, dtype)


def reduce_max(x: Sequence[float] | Sequence[int], dtype: str = "float32") -> float | int:
    return _reduce("max", x, dtype)


def matmul(
    a: Sequence[float],
    b: Sequence[float],
    m: int,
    n: int,
    k: int,
    *,
    dtype: str = "float32",
    tile: int = 16,
) -> list:
    """``C = A @ B`` for row-major A (m x k) and B (k x n), tiled in shared memory."""
    _code, ctype, suffix = _dtype(dtype, ("float32", "float64"))
    if len(a) != m * k or len(b) != k * n:
        raise ValueError(f"shapes do not match m={m}, n={n}, k={k}")
    if tile not in (8, 16, 32):
        raise ValueError("tile must be 8, 16 or 32")
    aa, bb, cc = _to_array(a, dtype), _to_array(b, dtype), _to_array([0] * (m * n), dtype)
    fn = getattr(_library(), f"awx_matmul_{suffix}")
    fn.argtypes = [ctypes.c_int] * 4 + [ctypes.POINTER(ctype)] * 3
    _check(fn(m, n, k, tile, _pointer(aa, ctype), _pointer(bb, ctype), _pointer(cc, ctype)))
    return _from_array(cc, dtype)


def sort(
    x: Sequence[float] | Sequence[int], dtype: str = "float32", descending: bool = False
) -> list:
    """Radix sort (CUB)."""
    _code, ctype, suffix = _dtype(dtype, ("float32", "float64", "int32", "int64"))
    keys = _to_array(x, dtype)
    fn = getattr(_library(), f"awx_sort_{suffix}")
    fn.argtypes = [ctypes.c_size_t, ctypes.POINTER(ctype), ctypes.c_int]
    _check(fn(len(keys), _pointer(keys, ctype), int(descending)))
    return _from_array(keys, dtype)


def argsort(x: Sequence[float], descending: bool = False) -> list[int]:
    """Indices that sort float32 ``x`` (a stable radix sort of (key, index) pairs)."""
    keys = _to_array(x, "float32")
    values = array("i", range(len(keys)))
    fn = _library().awx_sort_pairs_f32_i32
    fn.argtypes = [
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_float),
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int,
    ]
    _check(
        fn(
            len(keys),
            _pointer(keys, ctypes.c_float),
            _pointer(values, ctypes.c_int),
            int(descending),
        )
    )
    return list(values)


def cumsum(x: Sequence[float] | Sequence[int], dtype: str = "float32") -> list:
    """Inclusive prefix sum (CUB device scan)."""
    _code, ctype, suffix = _dtype(dtype, ("float32", "float64", "int32", "int64"))
    xs = _to_array(x, dtype)
    ys = _to_array([0] * len(xs), dtype)
    fn = getattr(_library(), f"awx_cumsum_{suffix}")
    fn.argtypes = [ctypes.c_size_t, ctypes.POINTER(ctype), ctypes.POINTER(ctype)]
    _check(fn(len(xs), _pointer(xs, ctype), _pointer(ys, ctype)))
    return _from_array(ys, dtype)
