"""Building against a pinned torch: the pin, the torch wheel, and what it says about CUDA.

A recipe that lists ``torch==X.Y.Z`` (optionally ``+cuXYZ``) among ``[build] requirements``
builds an extension against exactly that torch. Everything else follows from the torch wheel
itself, which is fetched once on the host into the archwheel cache (``pip download --no-deps``
with the host's pip settings, for the container's Python and platform tags) and read without
installing it:

* ``torch/version.py`` says which CUDA it was built with (``cuda = '13.0'``; ``None`` for a
  ``+cpu`` build) and its full version (``2.14.1+cu130``);
* its ``Requires-Dist`` holds the CUDA component pins it runs with, for CUDA 13.x NVIDIA's
  ``cuda-toolkit[cublas,cudart,...]==13.0.3`` metapackage: the toolkit archwheel compiles
  with is that metapackage at that version, plus the compiler's components.

A recipe whose ``[toolchain] cuda`` contradicts the torch, a CPU-only torch, or a torch that has
no wheel for the requested Python is refused here, before any container starts (exit 2).
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from archwheel.binary.coremetadata import parse_core_metadata
from archwheel.effects.files import ZIP_MEMBER_ERRORS
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.process import LineSink, run_program
from archwheel.errors import RecipeError, ToolError, UsageError
from archwheel.facts.python_target import PythonTarget
from archwheel.facts.versions import CudaVersion

TORCH_WHEELS = "torch-wheels"  # under the archwheel cache folder
# Components the compiler needs on top of what torch itself pins (cuda-toolkit extras).
COMPILE_EXTRAS = ("cccl", "crt", "nvcc", "nvvm")
_CU_LABEL = re.compile(r"^cu([0-9]{2,3})\Z")
_VERSION_PY_CUDA = re.compile(r"^cuda\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", re.M)
_VERSION_PY_VERSION = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.M)
_DEFAULT_LABEL = "pt{torch}cu{cuda_nodot}"
_LABEL_FIELDS = ("torch", "torch_nodot", "cuda", "cuda_nodot")
# pip's words for "the index has no such wheel" (versus a network or index failure).
_NOT_FOUND = (
    "No matching distribution",
    "Could not find a version",
    "require a different python version",
    "ResolutionImpossible",
)
_LOCAL_LABEL = re.compile(r"^[a-z0-9]+(\.[a-z0-9]+)*\Z")


@dataclass(frozen=True)
class TorchPin:
    """``torch==X.Y.Z[+local]`` as the recipe wrote it."""

    requirement: str  # as written in [build] requirements
    version: Version  # 2.14.1 or 2.14.1+cu130
    replaces: str | None = None  # the recipe's own pin, when --torch (a matrix cell) chose this

    @property
    def public(self) -> str:
        """The pinned version without its local label (``2.14.1``)."""
        return self.version.public

    @property
    def local(self) -> str | None:
        """The pin's local label (``cu130``), or None."""
        return self.version.local

    def cuda_from_label(self) -> CudaVersion | None:
        """13.0 for ``+cu130``; None without a local label."""
        return cuda_of_label(self.local) if self.local else None


@dataclass(frozen=True)
class TorchOptions:
    """A recipe's torch pin and what the built wheel says about it (``[torch]`` table)."""

    pin: TorchPin | None = None
    local_version: str | None = None  # label template; None: no local version label
    requires_dist: bool = True  # add Requires-Dist: torch==X.Y.Z to the wheel
    # Other torch releases the wheel should serve ([torch] loads_with): can-load checks each
    # after the build and Requires-Dist states the range of those that pass.
    loads_with: tuple[str, ...] = ()


def cuda_of_label(label: str) -> CudaVersion | None:
    """``cu130`` -> 13.0, ``cu128`` -> 12.8, ``cu118`` -> 11.8; None for anything else."""
    m = _CU_LABEL.match(label.split(".", maxsplit=1)[0])
    if not m:
        return None
    digits = m.group(1)
    return CudaVersion(int(digits[:-1]), int(digits[-1]))


def find_torch_pin(requirements: Sequence[str], where: str) -> TorchPin | None:
    """The torch requirement among ``requirements``, which must then be an exact pin."""
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise RecipeError(f"{where}: {text!r} is not a pip requirement: {exc}") from None
        if canonicalize_name(req.name) != "torch":
            continue
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
            raise RecipeError(
                f"{where}: {text!r}: an extension is built against one torch release; "
                "pin it exactly",
                hint="write torch==X.Y.Z (optionally +cuXYZ), e.g. torch==2.14.1",
            )
        try:
            version = Version(specs[0].version)
        except InvalidVersion:
            raise RecipeError(f"{where}: {text!r}: {specs[0].version!r} is not a version") from None
        pin = TorchPin(text, version)
        if pin.local == "cpu" or (pin.local or "").startswith(("rocm", "xpu")):
            raise RecipeError(
                f"{where}: {text!r} is a torch without CUDA ({pin.local}); a CUDA extension "
                "needs a CUDA build of torch",
                hint=f"pin torch=={pin.public} (a CUDA build) or torch=={pin.public}+cuXYZ",
            )
        return pin
    return None


def check_label_cuda(pin: TorchPin, cuda: CudaVersion, where: str) -> None:
    """``torch==2.14.1+cu128`` with ``[toolchain] cuda = "13.0"``: refused at load time."""
    from_label = pin.cuda_from_label()
    if from_label is not None and from_label != cuda:
        raise RecipeError(
            f"{where}: [toolchain] cuda is {cuda}, but {pin.requirement} is built with CUDA "
            f"{from_label}",
            hint=f'set cuda = "{from_label}", or pin a torch built with CUDA {cuda}',
        )


def local_label(template: str, torch_version: str, cuda: CudaVersion) -> str:
    """Render a local version label template: ``pt{torch}cu{cuda_nodot}`` -> pt2.14.1cu130."""
    base = Version(torch_version).public
    values = {
        "torch": base,
        "torch_nodot": base.replace(".", ""),
        "cuda": str(cuda),
        "cuda_nodot": f"{cuda.major}{cuda.minor}",
    }
    try:
        label = template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise UsageError(
            f"local version template {template!r} is not valid ({exc})",
            hint=f"fields: {', '.join('{' + f + '}' for f in _LABEL_FIELDS)}",
        ) from None
    label = label.lower()
    if not _LOCAL_LABEL.match(label):
        raise UsageError(
            f"local version template {template!r} renders {label!r}, which is not a PEP 440 "
            "local version label (letters, digits and dots)"
        )
    return label


def check_label_template(template: str, where: str) -> None:
    """Refuse a ``[torch] local_version`` template that renders no valid label, at recipe load."""
    try:
        local_label(template, "2.14.1", CudaVersion(13, 0))
    except UsageError as exc:
        raise RecipeError(f"{where}: {exc.message}", hint=exc.hint) from None


DEFAULT_LABEL_TEMPLATE = _DEFAULT_LABEL


# -- the torch wheel ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TorchWheel:
    """What a torch wheel says about itself, read from its files (not installed)."""

    path: Path
    version: str  # torch.__version__: 2.14.1+cu130
    cuda: CudaVersion | None  # torch.version.cuda; None for CPU builds
    requires_dist: tuple[str, ...]

    @property
    def filename(self) -> str:
        """The cached wheel's file name, as provenance records it."""
        return self.path.name

    def toolkit_requirement(self) -> Requirement | None:
        """torch's own ``cuda-toolkit[...]==V`` pin, markers dropped; None if it has none."""
        for text in self.requires_dist:
            req = Requirement(text)
            if canonicalize_name(req.name) == "cuda-toolkit" and not _is_extra(req):
                req.marker = None
                return req
        return None

    def nvidia_requirements(self) -> tuple[str, ...]:
        """torch's ``nvidia-*`` pins (markers dropped): the libraries it runs with."""
        out = []
        for text in self.requires_dist:
            req = Requirement(text)
            if canonicalize_name(req.name).startswith("nvidia-") and not _is_extra(req):
                req.marker = None
                out.append(str(req))
        return tuple(out)


def _is_extra(req: Requirement) -> bool:
    return req.marker is not None and "extra" in str(req.marker)


def compile_toolkit_requirement(wheel: TorchWheel) -> str | None:
    """torch's cuda-toolkit pin with the compiler's extras added: what the build installs."""
    req = wheel.toolkit_requirement()
    if req is None:
        return None
    extras = sorted({*req.extras, *COMPILE_EXTRAS})
    return f"{req.name}[{','.join(extras)}]{req.specifier}"


def read_torch_wheel(path: Path) -> TorchWheel:
    """Read ``METADATA`` and ``torch/version.py`` of a torch wheel."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            meta_name = next(
                (n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")),
                None,
            )
            if meta_name is None or "torch/version.py" not in names:
                raise ToolError(f"{path.name} is not a torch wheel (no METADATA or version.py)")
            metadata = archive.read(meta_name).decode("utf-8", "replace")
            version_py = archive.read("torch/version.py").decode("utf-8", "replace")
    except ZIP_MEMBER_ERRORS as exc:
        raise ToolError(f"cannot read the torch wheel {path}: {exc}") from None
    headers = parse_core_metadata(metadata)  # as pip reads it
    requires = tuple(line.strip() for line in headers.get_all("Requires-Dist"))
    m = _VERSION_PY_VERSION.search(version_py)
    meta_version = (headers.get("Version") or "").strip()
    version = m.group(1) if m else meta_version
    c = _VERSION_PY_CUDA.search(version_py)
    cuda_text = (c.group(1) or c.group(2)) if c else None
    cuda = CudaVersion.parse(cuda_text) if cuda_text else None
    return TorchWheel(path=path, version=version, cuda=cuda, requires_dist=requires)


def python_tag(python: str) -> str:
    """The wheel tag's interpreter part: ``cp311-cp311``, ``cp314-cp314t`` (free-threaded)."""
    return PythonTarget.parse(python).wheel_tag


def cached_torch_wheel(pin: TorchPin, python: str, folder: Path) -> Path | None:
    """A wheel already in the cache that satisfies the pin for this Python."""
    if not folder.is_dir():
        return None
    tag = python_tag(python)
    for path in sorted(folder.glob("torch-*.whl")):
        parts = path.name[: -len(".whl")].split("-")
        if len(parts) < 5 or f"{parts[2]}-{parts[3]}" != tag:
            continue
        try:
            version = Version(parts[1])
        except InvalidVersion:
            continue
        if version == pin.version:
            return path
        # torch==2.14.1 may be served as 2.14.1+cu130, never as a CPU or ROCm build.
        cuda_build = version.local is None or version.local.startswith("cu")
        if pin.local is None and version.public == pin.public and cuda_build:
            return path
    return None


def fetch_torch_wheel(
    pin: TorchPin,
    python: str,
    platforms: Sequence[str],
    pip: PipSettings,
    cache: Path,
    *,
    sink: LineSink | None = None,
) -> Path:
    """The torch wheel for ``pin`` and ``python``: from the cache, else ``pip download``."""
    folder = cache / TORCH_WHEELS
    found = cached_torch_wheel(pin, python, folder)
    if found is not None:
        if sink:
            sink(f"torch wheel from the cache: {found}")
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=folder) as tmp:
        base = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            *PythonTarget.parse(python).pip_args(), "--dest", tmp,
            *(arg for platform in platforms for arg in ("--platform", platform)),
            *pip.host_args(),
        ]  # fmt: skip
        # torch==2.13.0 also matches 2.13.0+cpu, which pip prefers when a local index or
        # find-links folder holds it (it sorts above the plain version): a pin without a
        # local label asks for exactly that version first (the CUDA build on PyPI), and only
        # if no index has it for the version with any label (2.13.0+cu130 on PyTorch's index).
        requests = [f"torch=={pin.version}"]
        if pin.local is None:
            requests.insert(0, f"torch==={pin.version}")
        for n, requirement in enumerate(requests):
            command = [*base, requirement]
            if sink:
                sink("+ " + " ".join(command[2:]))
            proc = run_program(command, echo=None, check=False, what="pip download torch")
            if sink:
                for line in (proc.stdout + proc.stderr).splitlines():
                    sink(line)
            text = proc.stdout + proc.stderr
            not_found = any(marker in text for marker in _NOT_FOUND)
            if proc.returncode == 0 or not not_found or n == len(requests) - 1:
                break
        if proc.returncode != 0:
            if not_found:
                raise RecipeError(
                    f"{pin.requirement}: the package index has no torch {pin.version} wheel for "
                    f"Python {python} ({python_tag(python)}, {platforms[0]} or older)",
                    hint="pick a Python version that torch release supports (--python, "
                    "[python] versions), or another torch; `pip index versions torch "
                    f"{' '.join(PythonTarget.parse(python).pip_args())}` lists what the index has",
                )
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()] or ["no output"]
            raise ToolError(
                f"pip could not download {pin.requirement} for Python {python}: {lines[-1]}",
                hint="check --index-url/--extra-index-url/--ca-bundle",
            )
        wheels = sorted(Path(tmp).glob("torch-*.whl"))
        if len(wheels) != 1:
            raise ToolError(f"pip download of {pin.requirement} produced {len(wheels)} wheels")
        target = folder / wheels[0].name
        shutil.move(str(wheels[0]), target)
    return target


def check_torch_wheel(wheel: TorchWheel, pin: TorchPin, cuda: CudaVersion, recipe: Path) -> None:
    """Refuse a CPU-only torch, or one whose CUDA is not the recipe's, naming both."""
    if wheel.cuda is None:
        raise RecipeError(
            f"{recipe}: {pin.requirement} resolved to torch {wheel.version} ({wheel.filename}), "
            "which has no CUDA (torch.version.cuda is None); this recipe builds CUDA "
            f"{cuda} extensions",
            hint=f"pin a CUDA build of torch, e.g. torch=={pin.public}+cu"
            f"{cuda.major}{cuda.minor}, from an index that serves it",
        )
    if wheel.cuda != cuda:
        raise RecipeError(
            f"{recipe}: [toolchain] cuda is {cuda}, but {pin.requirement} resolved to torch "
            f"{wheel.version}, built with CUDA {wheel.cuda}",
            hint=f'set cuda = "{wheel.cuda}", or pin a torch built with CUDA {cuda}',
        )
