"""Probes of the host: its GPUs and driver, and the Python environment that will run the code.

Each probe is one small class with one side effect, and reports its own failure as a
``ProbeError`` instead of raising: a half-installed CUDA stack (no driver, a broken NVML, a torch
that fails to import) must still give a report.

- ``NvmlProbe``: NVML through ``nvidia-ml-py`` (``pynvml``).
- ``NvidiaSmiProbe``: ``nvidia-smi --query-gpu=name,compute_cap,driver_version
  --format=csv,noheader``, the fallback.
- ``PythonProbe``: a subprocess of the target interpreter (default: this one) reads the installed
  distributions without importing them, then a second subprocess imports torch and reads its
  version, ``torch.version.cuda``, cuDNN, NCCL and the arch flags it was built with. Nothing needs
  a GPU; a crash or hang of ``import torch`` costs that probe only (with a timeout).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from archwheel.effects.files import is_text_list
from archwheel.effects.process import (
    MAX_ANSWER_NESTING,
    ProgramNotStarted,
    ProgramTimedOut,
    last_line,
    run_program,
)
from archwheel.facts.catalog import load_facts
from archwheel.facts.documents import load_document
from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion, parse_or_none

_MARKER = "@@archwheel-probe@@"


@dataclass(frozen=True)
class ProbeError:
    """One probe that could not answer, and why."""

    probe: str  # "nvml", "nvidia-smi", "python", "torch"
    message: str

    def one_line(self) -> str:
        """``probe: message``, as reports list it."""
        return f"{self.probe}: {self.message}"

    def to_json_dict(self) -> dict[str, str]:
        """The error as a JSON object, for the ``--json`` reports."""
        return {"probe": self.probe, "message": self.message}


class ProbeFailed(Exception):
    """Raised inside a probe; turned into a ``ProbeError`` by ``probe_gpus``."""


# -- GPUs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuInfo:
    """One GPU the host reports: its index, name, compute capability (None when the probe
    could not read it) and driver; made by the GPU probes, read by ``doctor``."""

    index: int
    name: str
    cc: ComputeCapability | None
    driver: str | None

    def to_json_dict(self) -> dict[str, Any]:
        """The GPU as a JSON object, for the ``--json`` reports."""
        return {
            "index": self.index,
            "name": self.name,
            "compute_capability": str(self.cc) if self.cc else None,
            "driver": self.driver,
        }


@dataclass(frozen=True)
class GpuProbeResult:
    """What the host says about its GPUs (empty when no probe answered)."""

    source: str | None  # "nvml", "nvidia-smi", or None
    gpus: tuple[GpuInfo, ...]
    driver: DriverVersion | None
    cuda_driver_version: CudaVersion | None  # what the driver supports ("CUDA Version")
    cuda_driver_source: str | None  # "nvml" or "facts" (derived from the driver branch)
    errors: tuple[ProbeError, ...] = ()

    @property
    def has_driver(self) -> bool:
        """Whether a probe answered, so an NVIDIA driver is installed and loaded."""
        return self.source is not None

    def to_json_dict(self) -> dict[str, Any]:
        """The result as a JSON object, its probe errors included, for the ``--json`` reports."""
        return {
            "source": self.source,
            "driver": str(self.driver) if self.driver else None,
            "cuda_driver_version": str(self.cuda_driver_version)
            if self.cuda_driver_version
            else None,
            "cuda_driver_source": self.cuda_driver_source,
            "gpus": [g.to_json_dict() for g in self.gpus],
            "errors": [e.to_json_dict() for e in self.errors],
        }


def _cuda_from_driver(driver: DriverVersion | None) -> CudaVersion | None:
    return load_facts().driver_cuda_version(driver) if driver else None


class NvmlProbe:
    """GPUs and driver through NVML (``nvidia-ml-py``)."""

    name = "nvml"

    def __init__(self, nvml: Any | None = None) -> None:
        self._nvml = nvml  # the pynvml module, or a fake with the same functions (tests)

    def _module(self) -> Any:
        if self._nvml is not None:
            return self._nvml
        try:
            return importlib.import_module("pynvml")
        except ImportError:
            raise ProbeFailed(
                "nvidia-ml-py is not installed (pip install 'archwheel[gpu]')"
            ) from None

    def probe(self) -> GpuProbeResult:
        """Ask NVML for the driver, the CUDA version it supports and every GPU;
        ``ProbeFailed`` when NVML is missing or does not answer."""
        nvml = self._module()
        try:
            nvml.nvmlInit()
        except Exception as exc:
            raise ProbeFailed(f"cannot initialise NVML: {_nvml_text(exc)}") from None
        try:
            driver_text = _text(nvml.nvmlSystemGetDriverVersion())
            cuda: CudaVersion | None = None
            source: str | None = None
            try:
                raw = int(nvml.nvmlSystemGetCudaDriverVersion_v2())
                cuda, source = CudaVersion(raw // 1000, (raw % 1000) // 10), "nvml"
            except Exception:
                cuda, source = (
                    _cuda_from_driver(parse_or_none(DriverVersion.parse, driver_text)),
                    "facts",
                )
            gpus: list[GpuInfo] = []
            for index in range(int(nvml.nvmlDeviceGetCount())):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                name = _text(nvml.nvmlDeviceGetName(handle))
                try:
                    major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
                    cc: ComputeCapability | None = ComputeCapability(int(major), int(minor))
                except Exception:
                    cc = None
                gpus.append(GpuInfo(index, name, cc, driver_text))
        except ProbeFailed:
            raise
        except Exception as exc:
            raise ProbeFailed(f"NVML query failed: {_nvml_text(exc)}") from None
        finally:
            with contextlib.suppress(Exception):
                nvml.nvmlShutdown()
        driver = parse_or_none(DriverVersion.parse, driver_text)
        return GpuProbeResult("nvml", tuple(gpus), driver, cuda, source if cuda else None)


class NvidiaSmiProbe:
    """GPUs and driver through ``nvidia-smi`` (the fallback when NVML cannot answer)."""

    name = "nvidia-smi"
    QUERY = ("--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader")

    def __init__(self, executable: str = "nvidia-smi", timeout: float = 30.0) -> None:
        self.executable = executable
        self.timeout = timeout

    def probe(self) -> GpuProbeResult:
        """Run ``nvidia-smi`` and read its GPUs and driver (the CUDA version from the facts);
        ``ProbeFailed`` when it is missing, hangs or fails."""
        path = shutil.which(self.executable)
        if path is None:
            raise ProbeFailed(f"{self.executable} not found on PATH (no NVIDIA driver installed?)")
        try:
            proc = run_program([path, *self.QUERY], echo=None, check=False, timeout=self.timeout)
        except ProgramTimedOut:
            raise ProbeFailed(f"{path} did not answer within {self.timeout:.0f} s") from None
        except ProgramNotStarted as exc:
            raise ProbeFailed(f"cannot run {path}: {exc.reason}") from None
        if proc.returncode != 0:
            detail = (proc.stdout + proc.stderr).strip().splitlines()
            raise ProbeFailed(
                f"{path} exited {proc.returncode}: {detail[0] if detail else 'no output'}"
            )
        gpus = parse_nvidia_smi_csv(proc.stdout)
        driver_text = next((g.driver for g in gpus if g.driver), None)
        driver = parse_or_none(DriverVersion.parse, driver_text)
        cuda = _cuda_from_driver(driver)
        return GpuProbeResult("nvidia-smi", gpus, driver, cuda, "facts" if cuda else None)


def parse_nvidia_smi_csv(text: str) -> tuple[GpuInfo, ...]:
    """Rows of ``name, compute_cap, driver_version``; malformed rows are skipped."""
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0]:
            continue
        name, cc_text, driver_text = parts[0], parts[1], parts[2]
        cc = parse_or_none(ComputeCapability.parse, cc_text)  # "[N/A]" on old drivers: None
        gpus.append(GpuInfo(len(gpus), name, cc, driver_text or None))
    return tuple(gpus)


def probe_gpus(
    probes: tuple[NvmlProbe | NvidiaSmiProbe, ...] | None = None,
) -> GpuProbeResult:
    """Ask each probe in turn (NVML, then nvidia-smi); the first answer wins."""
    chain = probes if probes is not None else (NvmlProbe(), NvidiaSmiProbe())
    errors: list[ProbeError] = []
    for probe in chain:
        try:
            result = probe.probe()
        except ProbeFailed as exc:
            errors.append(ProbeError(probe.name, str(exc)))
            continue
        return GpuProbeResult(
            result.source,
            result.gpus,
            result.driver,
            result.cuda_driver_version,
            result.cuda_driver_source,
            tuple(errors),
        )
    return GpuProbeResult(None, (), None, None, None, tuple(errors))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if "Library Not Found" in text or "LibraryNotFound" in type(exc).__name__:
        return "the NVIDIA driver library libnvidia-ml.so.1 is not installed (no driver?)"
    if "Driver Not Loaded" in text:
        return "the NVIDIA kernel driver is not loaded"
    return text


# -- the Python environment ---------------------------------------------------------------------

_DISTRIBUTIONS_SCRIPT = r"""
import importlib.metadata as md, json, platform, sys, re
wanted = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-.*|cuda-.*)$")
extra = set(json.loads(sys.argv[1])) if len(sys.argv) > 1 else set()
dists = {}
files = {}
for d in md.distributions():
    name = re.sub(r"[-_.]+", "-", (d.metadata["Name"] or "")).lower()
    if not (wanted.match(name) or name in extra) or name in dists:
        continue
    dists[name] = d.version
    libs = []
    for f in d.files or []:
        if re.search(r"\.so(\.[0-9]+)*$", f.name):
            libs.append([str(f), str(f.locate())])
    files[name] = libs
out = {"python": sys.executable, "python_version": platform.python_version(),
       "distributions": dists, "native_files": files}
print(MARKER + json.dumps(out))
"""

_TORCH_SCRIPT = r"""
import json, sys
out = {"errors": {}}
def describe(exc):
    first = (str(exc).splitlines() or [""])[0][:300]
    return type(exc).__name__ + (": " + first if first else "")
def attempt(key, fn):
    try:
        out[key] = fn()
    except BaseException as exc:
        out["errors"][key] = describe(exc)
try:
    import warnings
    warnings.simplefilter("ignore")
    import torch
except BaseException as exc:
    out["import_error"] = describe(exc)
    print(MARKER + json.dumps(out))
    sys.exit(0)
def arch_flags():
    getter = getattr(torch._C, "_cuda_getArchFlags", None)
    return getter() if getter else None
def cuda_flags():
    return [l for l in torch.__config__.show().splitlines() if "CUDA_FLAGS" in l][:1]
attempt("version", lambda: str(torch.__version__))
attempt("location", lambda: torch.__file__)
attempt("cuda", lambda: torch.version.cuda)
attempt("cudnn", lambda: torch.backends.cudnn.version())
attempt("nccl", lambda: list(torch.cuda.nccl.version()) if torch.version.cuda else None)
attempt("arch_flags", arch_flags)
attempt("arch_list", lambda: torch.cuda.get_arch_list())
attempt("config", cuda_flags)
attempt("cuda_available", lambda: bool(torch.cuda.is_available()))
attempt("device_count", lambda: int(torch.cuda.device_count()))
print(MARKER + json.dumps(out))
"""


@dataclass(frozen=True)
class TorchInfo:
    """What an installed torch says about itself (all read without a GPU)."""

    installed: bool
    version: str | None = None
    location: str | None = None
    cuda: str | None = None  # torch.version.cuda
    cudnn: str | None = None
    nccl: str | None = None
    arch_flags: tuple[str, ...] = ()  # ("sm_75", ..., "compute_120")
    arch_flags_source: str | None = None
    cuda_available: bool | None = None
    device_count: int | None = None
    import_error: str | None = None
    errors: tuple[ProbeError, ...] = ()

    def to_json_dict(self) -> dict[str, Any]:
        """The torch facts as a JSON object, for the ``--json`` reports."""
        return {
            "installed": self.installed,
            "version": self.version,
            "location": self.location,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "arch_flags": list(self.arch_flags),
            "arch_flags_source": self.arch_flags_source,
            "cuda_available": self.cuda_available,
            "device_count": self.device_count,
            "import_error": self.import_error,
            "errors": [e.to_json_dict() for e in self.errors],
        }


@dataclass(frozen=True)
class PythonEnvironment:
    """A Python environment: its interpreter, CUDA-related distributions and torch."""

    python: str
    python_version: str | None
    distributions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    native_files: Mapping[str, tuple[tuple[str, str], ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )  # distribution -> (RECORD path, absolute path) of its .so files
    torch: TorchInfo = field(default_factory=lambda: TorchInfo(installed=False))
    errors: tuple[ProbeError, ...] = ()

    def to_json_dict(self) -> dict[str, Any]:
        """The environment as a JSON object (its native files left out), for ``--json``."""
        return {
            "python": self.python,
            "python_version": self.python_version,
            "distributions": dict(sorted(self.distributions.items())),
            "torch": self.torch.to_json_dict(),
            "errors": [e.to_json_dict() for e in self.errors],
        }


class PythonProbe:
    """Reads a Python environment through subprocesses of its interpreter."""

    def __init__(
        self,
        python: str | None = None,
        timeout: float = 180.0,
        also: tuple[str, ...] = (),
    ) -> None:
        self.python = python or sys.executable
        self.timeout = timeout
        # Distributions to read beyond torch, triton and the nvidia-*/cuda-* packages.
        self.also = tuple(sorted({re.sub(r"[-_.]+", "-", n).lower() for n in also}))

    def _run(self, script: str, probe: str, *argv: str) -> dict[str, Any]:
        # absolute(), not resolve(): a venv's python is a symlink whose target is not the venv.
        executable = str(Path(shutil.which(self.python) or self.python).absolute())
        if not Path(executable).is_file() or not os.access(executable, os.X_OK):
            raise ProbeFailed(f"{self.python} is not an executable Python interpreter")
        # An empty working directory: a ./torch folder must not shadow the installed one.
        with tempfile.TemporaryDirectory(prefix="archwheel-probe-") as cwd:
            try:
                proc = run_program(
                    [executable, "-c", script.replace("MARKER", repr(_MARKER)), *argv],
                    echo=None,
                    check=False,
                    timeout=self.timeout,
                    cwd=cwd,
                )
            except ProgramTimedOut:
                raise ProbeFailed(
                    f"{probe} probe did not finish within {self.timeout:.0f} s"
                ) from None
            except ProgramNotStarted as exc:
                raise ProbeFailed(f"cannot run {executable}: {exc.reason}") from None
        for line in proc.stdout.splitlines():
            if line.startswith(_MARKER):
                # The interpreter is the user's: its answer is read as untrusted input.
                data = load_document(
                    line[len(_MARKER) :],
                    origin=f"{probe} probe's answer",
                    nesting=MAX_ANSWER_NESTING,
                    error=ProbeFailed,
                )
                if not isinstance(data, dict):
                    raise ProbeFailed(f"{probe} probe answered JSON that is not an object")
                return data
        tail = last_line(proc.stderr, limit=300)
        how = (
            f"was killed by signal {-proc.returncode}"
            if proc.returncode < 0
            else (f"exited {proc.returncode}")
        )
        raise ProbeFailed(f"{probe} probe {how}: {tail}")

    def probe(self, *, with_torch: bool = True) -> PythonEnvironment:
        """Read the environment's distributions and, with ``with_torch``, import its torch;
        a probe that fails is kept in ``errors``, never raised."""
        errors: list[ProbeError] = []
        try:
            env = self._run(_DISTRIBUTIONS_SCRIPT, "python", json.dumps(self.also))
            distributions, native = _environment_fields(env)
        except ProbeFailed as exc:
            return PythonEnvironment(self.python, None, errors=(ProbeError("python", str(exc)),))
        torch = TorchInfo(installed=False)
        if "torch" in distributions and with_torch:
            try:
                torch = torch_info(self._run(_TORCH_SCRIPT, "torch"), distributions["torch"])
            except ProbeFailed as exc:
                torch = TorchInfo(
                    installed=True,
                    version=distributions["torch"],
                    import_error=str(exc),
                    errors=(ProbeError("torch", str(exc)),),
                )
        elif "torch" in distributions:
            torch = TorchInfo(installed=True, version=distributions["torch"])
        return PythonEnvironment(
            python=_field_text(env, "python") or self.python,
            python_version=_field_text(env, "python_version"),
            distributions=MappingProxyType(distributions),
            native_files=MappingProxyType(native),
            torch=torch,
            errors=tuple(errors),
        )


def _field_text(data: Mapping[str, Any], key: str) -> str | None:
    """``data[key]`` when it is a string; None when it is absent or anything else."""
    value = data.get(key)
    return value if isinstance(value, str) else None


def _environment_fields(
    env: Mapping[str, Any],
) -> tuple[dict[str, str], dict[str, tuple[tuple[str, str], ...]]]:
    """The distributions (name -> version) and native files of the python probe's answer,
    ``ProbeFailed`` naming the field when the answer is not of the probe script's shape (the
    interpreter is the user's: anything may come back)."""
    distributions = env.get("distributions", {})
    if not isinstance(distributions, dict) or not all(
        isinstance(v, str) for v in distributions.values()
    ):
        raise ProbeFailed("python probe answered 'distributions' that are not names and versions")
    native_files = env.get("native_files", {})
    native: dict[str, tuple[tuple[str, str], ...]] = {}
    if not isinstance(native_files, dict):
        raise ProbeFailed("python probe answered 'native_files' that is not an object")
    for name, pairs in native_files.items():
        if not isinstance(pairs, list) or not all(is_text_list(p) and len(p) == 2 for p in pairs):
            raise ProbeFailed(
                f"python probe answered 'native_files' of {name!r} that are not paths"
            )
        native[str(name)] = tuple((a, b) for a, b in pairs)
    return {str(k): v for k, v in distributions.items()}, native


def torch_info(data: Mapping[str, Any], installed_version: str) -> TorchInfo:
    """Turn the torch probe's raw answer into a ``TorchInfo`` (pure; tested directly). A field
    of the wrong type is unknown (None), as if the probe had not found it."""
    raw_errors = data.get("errors")
    errors = tuple(
        ProbeError(f"torch.{k}", str(v))
        for k, v in (raw_errors.items() if isinstance(raw_errors, dict) else ())
    )
    import_error = data.get("import_error")
    if import_error:
        return TorchInfo(
            installed=True,
            version=installed_version,
            import_error=str(import_error),
            errors=(ProbeError("torch", f"import torch failed: {import_error}"),),
        )
    flags, source = _arch_flags(data)
    nccl = data.get("nccl")
    available = data.get("cuda_available")
    count = data.get("device_count")
    return TorchInfo(
        installed=True,
        version=_field_text(data, "version") or installed_version,
        location=_field_text(data, "location"),
        cuda=_field_text(data, "cuda"),
        cudnn=format_cudnn(data.get("cudnn")),
        nccl=".".join(str(p) for p in nccl) if isinstance(nccl, list) and nccl else None,
        arch_flags=flags,
        arch_flags_source=source,
        cuda_available=available if isinstance(available, bool) else None,
        device_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        errors=errors,
    )


def format_cudnn(raw: Any) -> str | None:
    """cuDNN's integer version: 92400 -> 9.24.0 (cuDNN 9), 8902 -> 8.9.2 (cuDNN 8)."""
    if not isinstance(raw, int) or raw <= 0:
        return None
    if raw >= 90000:
        return f"{raw // 10000}.{raw % 10000 // 100}.{raw % 100}"
    return f"{raw // 1000}.{raw % 1000 // 100}.{raw % 100}"


_GENCODE = re.compile(r"arch=compute_([0-9]+[af]?),code=\[?([a-z_0-9,]+)\]?")


def _arch_flags(data: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
    flags = data.get("arch_flags")
    if isinstance(flags, str) and flags.strip():
        return tuple(flags.split()), "torch._C._cuda_getArchFlags()"
    arch_list = data.get("arch_list")
    if isinstance(arch_list, list) and arch_list:
        return tuple(str(a) for a in arch_list), "torch.cuda.get_arch_list()"
    config = data.get("config")
    if isinstance(config, list) and config:
        found: list[str] = []
        for _, codes in _GENCODE.findall(str(config[0])):
            found.extend(c for c in codes.split(",") if c not in found)
        if found:
            return tuple(found), "torch.__config__.show() CUDA_FLAGS"
    return (), None
