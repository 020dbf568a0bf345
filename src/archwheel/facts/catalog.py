"""The CUDA facts data file (``cuda_facts.toml``) loaded into frozen, validated objects.

This module owns the *data*: which compute capabilities exist, which GPU carries which, what each
toolkit can target, which drivers it needs, which PTX ISA a driver understands, and PyTorch's
arch-list conventions. The data file is validated on load; a malformed file raises
``FactsError`` naming the key.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from archwheel.errors import FactsError, UsageError
from archwheel.facts.versions import (
    ComputeCapability,
    CudaVersion,
    DriverVersion,
    PtxIsaVersion,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

FACTS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class CapabilityInfo:
    """A compute capability known to exist, with its architecture family name."""

    cc: ComputeCapability
    family: str
    note: str = ""
    verified: bool = True


@dataclass(frozen=True)
class IntegratedGpu:
    """A compute capability of integrated (Tegra/Jetson) GPUs (rule ``sass-integrated``).

    ``same_as``: the other number of the same device (10.1 became 11.0 in CUDA 13.0).
    ``desktop_cubins_from``: the CUDA version from which discrete GPUs' cubins of the same
    major also run on it (None: never).
    """

    cc: ComputeCapability
    same_as: ComputeCapability | None = None
    desktop_cubins_from: CudaVersion | None = None


@dataclass(frozen=True)
class GpuModel:
    """A product name and its compute capability (from the GPU catalog)."""

    name: str
    cc: ComputeCapability


@dataclass(frozen=True)
class Toolkit:
    """What one CUDA toolkit release can target, and the drivers it needs."""

    version: CudaVersion
    targets: frozenset[ComputeCapability]
    arch_specific: frozenset[ComputeCapability]
    family_specific: frozenset[ComputeCapability]
    min_driver: DriverVersion
    compat_driver: DriverVersion
    ptx_isa: PtxIsaVersion
    removed: Mapping[str, tuple[ComputeCapability, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    renamed: Mapping[ComputeCapability, ComputeCapability] = field(
        default_factory=lambda: MappingProxyType({})
    )
    verified: bool = True

    def targets_sorted(self) -> list[ComputeCapability]:
        return sorted(self.targets)


@dataclass(frozen=True)
class CudaFacts:
    """Every CUDA fact archwheel uses, loaded from one versioned data file."""

    facts_version: str
    sources: Mapping[str, str]
    rules: Mapping[str, str]
    capabilities: Mapping[ComputeCapability, CapabilityInfo]
    gpus: tuple[GpuModel, ...]
    toolkits: tuple[Toolkit, ...]
    ptx_isa_driver: Mapping[PtxIsaVersion, CudaVersion]
    driver_cuda: Mapping[int, CudaVersion]
    torch_arch_names: tuple[tuple[str, str], ...]
    official_arch_lists: Mapping[str, str]
    # cu tag -> the first torch release built for it ("cu128" -> "2.7").
    torch_first_release: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    integrated: Mapping[ComputeCapability, IntegratedGpu] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # cu tag -> where its official arch list comes from; the pipeline's list where it differs.
    official_arch_list_sources: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({})
    )
    pipeline_arch_lists: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # torch release -> its source (releases known to exist on the package index).
    torch_releases: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    # -- lookups ------------------------------------------------------------------------------
    @cached_property
    def suffixed_capabilities(self) -> frozenset[ComputeCapability]:
        """The capabilities some toolkit builds with an 'a' or 'f' suffix (made once: the scan
        asks for every binary it reads)."""
        return frozenset(cc for tk in self.toolkits for cc in tk.arch_specific | tk.family_specific)

    def is_known(self, cc: ComputeCapability) -> bool:
        return cc in self.capabilities

    def pipeline_arch_list(self, tag: str) -> str:
        """The arch list PyTorch's build pipeline sets for a CUDA build (``cu130``): the
        recorded pipeline list where a released wheel differs from it, else the official one."""
        return self.pipeline_arch_lists.get(tag) or self.official_arch_lists[tag]

    def is_integrated(self, cc: ComputeCapability) -> bool:
        """Whether ``cc`` is an integrated (Tegra/Jetson) GPU's compute capability."""
        return cc in self.integrated

    def same_device(self, a: ComputeCapability, b: ComputeCapability) -> bool:
        """``a`` and ``b`` name one device (equal, or renamed: 10.1 and 11.0)."""
        if a == b:
            return True
        info = self.integrated.get(a)
        return info is not None and info.same_as == b

    def family(self, cc: ComputeCapability) -> str:
        info = self.capabilities.get(cc)
        return info.family if info else "unknown"

    def rule(self, rule_id: str) -> str:
        """The one-line text of a compatibility rule, for citing in verdicts."""
        try:
            return self.rules[rule_id]
        except KeyError:
            raise FactsError(f"no rule {rule_id!r} in the CUDA facts") from None

    def toolkit(self, version: CudaVersion | str) -> Toolkit:
        """The toolkit of that version.

        An unrecorded minor release of a known major (13.1 between 13.0 and 13.2, or 13.5 after
        13.2) is answered with the newest recorded release of that major below it: its targets
        are a safe subset.
        """
        v = CudaVersion.parse(version) if isinstance(version, str) else version
        for tk in self.toolkits:
            if tk.version == v:
                return tk
        below = [tk for tk in self.toolkits if tk.version.major == v.major and tk.version < v]
        if below:
            return max(below, key=lambda tk: tk.version)
        known = ", ".join(str(tk.version) for tk in self.toolkits)
        raise UsageError(f"no facts recorded for CUDA {v}", hint=f"known toolkits: {known}")

    def first_toolkit_targeting(self, cc: ComputeCapability, variant: str = "") -> Toolkit | None:
        """The oldest toolkit that can compile for ``cc`` (with the 'a'/'f' variant)."""
        for tk in self.toolkits:
            pool = {"": tk.targets, "a": tk.arch_specific, "f": tk.family_specific}[variant]
            if cc in pool:
                return tk
        return None

    def last_toolkit_targeting(self, cc: ComputeCapability) -> Toolkit | None:
        found = [tk for tk in self.toolkits if cc in tk.targets]
        return found[-1] if found else None

    def gpus_for(self, cc: ComputeCapability) -> list[str]:
        return [g.name for g in self.gpus if g.cc == cc]

    def find_gpu(self, query: str) -> GpuModel:
        """Resolve a product name ("RTX 5090", "NVIDIA A100-SXM4-80GB", "h100") to its model.

        Raises ``UsageError`` listing close names when nothing matches.
        """
        wanted = _normalize_gpu_name(query)
        if not wanted:
            raise UsageError(f"empty GPU name {query!r}")
        exact = [g for g in self.gpus if _normalize_gpu_name(g.name) == wanted]
        if exact:
            return exact[0]
        # Product strings carry form factors and memory sizes after the model ("A100 SXM4 80GB").
        prefixed = [
            g
            for g in self.gpus
            if wanted.startswith(_normalize_gpu_name(g.name) + " ")
            or (
                _squash(wanted).startswith(_squash(g.name))
                and _boundary_ok(_squash(wanted), _squash(g.name))
            )
        ]
        if prefixed:
            return max(prefixed, key=lambda g: len(g.name))
        close = [g.name for g in self.gpus if _squash(query)[:3] in _squash(g.name)]
        hint = f"did you mean {', '.join(close[:5])}?" if close else "see `archwheel gpus`;"
        raise UsageError(f"unknown GPU {query!r}", hint=hint + " or give --cc X.Y instead")

    def driver_cuda_version(self, driver: DriverVersion) -> CudaVersion | None:
        """The newest CUDA version a driver supports (what nvidia-smi prints as CUDA Version)."""
        branches = sorted(b for b in self.driver_cuda if b <= driver.branch)
        return self.driver_cuda[branches[-1]] if branches else None

    def ptx_isa_min_cuda(self, isa: PtxIsaVersion) -> CudaVersion | None:
        """The driver CUDA version needed to JIT PTX of this ISA version (None if unknown)."""
        return self.ptx_isa_driver.get(isa)


_GPU_NOISE = ("nvidia", "geforce", "tesla", "quadro")


def _normalize_gpu_name(name: str) -> str:
    words = re.split(r"[\s\-_/]+", name.strip().lower())
    return " ".join(w for w in words if w and w not in _GPU_NOISE)


def _squash(name: str) -> str:
    return _normalize_gpu_name(name).replace(" ", "")


def _boundary_ok(wanted: str, model: str) -> bool:
    """ "a100sxm480gb" starts with "a100" at a boundary; "a1000" must not match "a100"."""
    rest = wanted[len(model) :]
    return not rest or not rest[0].isdigit()


# -- loading -----------------------------------------------------------------------------------


class _Reader:
    """Typed access to the raw TOML with errors that name the key."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, where: str, what: str) -> FactsError:
        return FactsError(f"{self.origin}: {where}: {what}")

    def get(self, table: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
        if key not in table:
            raise self.fail(where, f"missing key {key!r}")
        value = table[key]
        if not isinstance(value, kind):
            raise self.fail(where, f"{key!r} must be a {kind.__name__}")
        return value

    def cc(self, text: Any, where: str) -> ComputeCapability:
        if not isinstance(text, str):
            raise self.fail(where, f"compute capability must be a string, not {text!r}")
        try:
            return ComputeCapability.parse(text)
        except UsageError as exc:
            raise self.fail(where, exc.message) from None

    def ccs(self, values: Any, where: str) -> frozenset[ComputeCapability]:
        if not isinstance(values, list):
            raise self.fail(where, "must be a list of compute capabilities")
        return frozenset(self.cc(v, where) for v in values)


def parse_facts(data: Mapping[str, Any], origin: str = "cuda_facts.toml") -> CudaFacts:
    """Validate raw facts data and build the frozen model."""
    r = _Reader(origin)
    if data.get("schema_version") != FACTS_SCHEMA_VERSION:
        raise r.fail("schema_version", f"expected {FACTS_SCHEMA_VERSION}")
    caps: dict[ComputeCapability, CapabilityInfo] = {}
    for i, row in enumerate(r.get(data, "compute_capability", list, "top level")):
        where = f"compute_capability[{i}]"
        cc = r.cc(r.get(row, "cc", str, where), where)
        caps[cc] = CapabilityInfo(
            cc=cc,
            family=r.get(row, "family", str, where),
            note=str(row.get("note", "")),
            verified=bool(row.get("verified", True)),
        )
    gpus: list[GpuModel] = []
    for i, row in enumerate(r.get(data, "gpu", list, "top level")):
        where = f"gpu[{i}]"
        cc = r.cc(r.get(row, "cc", str, where), where)
        if cc not in caps:
            raise r.fail(where, f"compute capability {cc} is not in compute_capability")
        gpus.extend(GpuModel(name=n, cc=cc) for n in r.get(row, "names", list, where))
    toolkits: list[Toolkit] = []
    for i, row in enumerate(r.get(data, "toolkit", list, "top level")):
        where = f"toolkit[{i}]"
        try:
            version = CudaVersion.parse(r.get(row, "version", str, where))
            min_driver = DriverVersion.parse(r.get(row, "min_driver", str, where))
            compat_driver = DriverVersion.parse(r.get(row, "compat_driver", str, where))
            ptx_isa = PtxIsaVersion.parse(r.get(row, "ptx_isa", str, where))
        except UsageError as exc:
            raise r.fail(where, exc.message) from None
        targets = r.ccs(r.get(row, "targets", list, where), where + ".targets")
        arch_specific = r.ccs(row.get("arch_specific", []), where + ".arch_specific")
        family_specific = r.ccs(row.get("family_specific", []), where + ".family_specific")
        for cc in targets | arch_specific | family_specific:
            if cc not in caps:
                raise r.fail(where, f"target {cc} is not in compute_capability")
        if not (arch_specific | family_specific) <= targets:
            raise r.fail(where, "'a'/'f' targets must also be plain targets")
        removed = {
            str(name): tuple(sorted(r.ccs(ccs, f"{where}.removed.{name}")))
            for name, ccs in dict(row.get("removed", {})).items()
        }
        renamed = {
            r.cc(old, where + ".renamed"): r.cc(new, where + ".renamed")
            for old, new in dict(row.get("renamed", {})).items()
        }
        toolkits.append(
            Toolkit(
                version=version,
                targets=targets,
                arch_specific=arch_specific,
                family_specific=family_specific,
                min_driver=min_driver,
                compat_driver=compat_driver,
                ptx_isa=ptx_isa,
                removed=MappingProxyType(removed),
                renamed=MappingProxyType(renamed),
                verified=bool(row.get("verified", True)),
            )
        )
    toolkits.sort(key=lambda tk: tk.version)
    try:
        ptx_isa_driver = {
            PtxIsaVersion.parse(k): CudaVersion.parse(v)
            for k, v in r.get(data, "ptx_isa_driver", dict, "top level").items()
        }
        driver_cuda = {
            int(k): CudaVersion.parse(v)
            for k, v in r.get(data, "driver_cuda", dict, "top level").items()
        }
    except (UsageError, ValueError) as exc:
        raise r.fail("ptx_isa_driver/driver_cuda", str(exc)) from None
    integrated: dict[ComputeCapability, IntegratedGpu] = {}
    for i, row in enumerate(data.get("integrated", [])):
        where = f"integrated[{i}]"
        cc = r.cc(r.get(row, "cc", str, where), where)
        if cc not in caps:
            raise r.fail(where, f"compute capability {cc} is not in compute_capability")
        same_as = r.cc(row["same_as"], where) if "same_as" in row else None
        since = None
        if "desktop_cubins_from" in row:
            try:
                since = CudaVersion.parse(r.get(row, "desktop_cubins_from", str, where))
            except UsageError as exc:
                raise r.fail(where, exc.message) from None
        integrated[cc] = IntegratedGpu(cc, same_as, since)
    for cc, info in integrated.items():
        if info.same_as is not None and info.same_as not in integrated:
            raise r.fail("integrated", f"{cc} is the same device as {info.same_as}, not listed")
    pytorch = r.get(data, "pytorch", dict, "top level")
    names = r.get(pytorch, "arch_names", list, "pytorch")
    torch_arch_names = tuple((str(a), str(b)) for a, b in names)
    official = {str(k): str(v) for k, v in dict(pytorch.get("official_arch_lists", {})).items()}
    first_release = {str(k): str(v) for k, v in dict(pytorch.get("first_release", {})).items()}
    list_sources = {
        str(k): str(v) for k, v in dict(pytorch.get("official_arch_list_sources", {})).items()
    }
    missing_source = sorted(set(official) - set(list_sources))
    if missing_source:
        raise r.fail("pytorch.official_arch_list_sources", f"no source for {missing_source}")
    pipeline = {str(k): str(v) for k, v in dict(pytorch.get("pipeline_arch_lists", {})).items()}
    releases = {str(k): str(v) for k, v in dict(pytorch.get("releases", {})).items()}
    return CudaFacts(
        facts_version=r.get(data, "facts_version", str, "top level"),
        sources=MappingProxyType(dict(r.get(data, "sources", dict, "top level"))),
        rules=MappingProxyType(dict(r.get(data, "rules", dict, "top level"))),
        capabilities=MappingProxyType(caps),
        gpus=tuple(gpus),
        toolkits=tuple(toolkits),
        ptx_isa_driver=MappingProxyType(ptx_isa_driver),
        driver_cuda=MappingProxyType(driver_cuda),
        torch_arch_names=torch_arch_names,
        official_arch_lists=MappingProxyType(official),
        torch_first_release=MappingProxyType(first_release),
        integrated=MappingProxyType(integrated),
        official_arch_list_sources=MappingProxyType(list_sources),
        pipeline_arch_lists=MappingProxyType(pipeline),
        torch_releases=MappingProxyType(releases),
    )


def load_facts_file(path: Path) -> CudaFacts:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FactsError(f"{path}: cannot read the CUDA facts: {exc}") from None
    return parse_facts(data, origin=str(path))


@cache
def load_facts() -> CudaFacts:
    """The facts shipped with archwheel (cached; the objects are immutable)."""
    text = resources.files("archwheel.facts").joinpath("cuda_facts.toml").read_text("utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FactsError(f"cuda_facts.toml: {exc}") from None
    return parse_facts(data)
