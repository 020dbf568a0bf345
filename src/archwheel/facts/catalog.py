"""The CUDA facts data file (``cuda_facts.toml``) loaded into frozen, validated objects.

This module owns the *data*: which compute capabilities exist, which GPU carries which, what each
toolkit can target, which drivers it needs, which PTX ISA a driver understands, and PyTorch's
arch-list conventions. The data file is validated on load; a malformed file raises
``FactsError`` naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from types import MappingProxyType
from typing import Any, TypeVar, cast

from archwheel.errors import FactsError, UsageError
from archwheel.facts.documents import Table, load_document
from archwheel.facts.versions import (
    ComputeCapability,
    CudaVersion,
    DriverVersion,
    PtxIsaVersion,
)

FACTS_SCHEMA_VERSION = 1
MAX_FACTS_NESTING = 16  # tables and arrays inside each other (the data file nests 3 deep)
_V = TypeVar("_V", CudaVersion, DriverVersion, PtxIsaVersion)


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


def _cc(table: Table, key: str) -> ComputeCapability:
    """The compute capability written at ``key`` ("9.0")."""
    return _parse_cc(table, key, table.text(key))


def _parse_cc(table: Table, key: str, text: object) -> ComputeCapability:
    if not isinstance(text, str):
        raise table.fail(key, f"compute capability must be a string, not {text!r}")
    try:
        return ComputeCapability.parse(text)
    except UsageError as exc:
        raise table.fail(key, exc.message) from None


def _ccs(table: Table, key: str, *, required: bool = False) -> frozenset[ComputeCapability]:
    """The list of compute capabilities at ``key`` (empty where absent, unless required)."""
    return frozenset(_parse_cc(table, key, v) for v in table.texts(key, None if required else ()))


def _version(table: Table, key: str, kind: type[_V]) -> _V:
    """A version (CUDA, driver, PTX ISA) written as a string at ``key``."""
    try:
        return kind.parse(table.text(key))
    except UsageError as exc:
        raise table.fail(None, exc.message) from None


def parse_facts(data: Mapping[str, Any], origin: str = "cuda_facts.toml") -> CudaFacts:
    """Validate raw facts data and build the frozen model; ``FactsError`` names the key."""
    top = Table(data, origin, FactsError, toml=True)
    if data.get("schema_version") != FACTS_SCHEMA_VERSION:
        raise top.fail("schema_version", f"expected {FACTS_SCHEMA_VERSION}")
    caps: dict[ComputeCapability, CapabilityInfo] = {}
    for row in top.tables("compute_capability", required=True):
        cc = _cc(row, "cc")
        caps[cc] = CapabilityInfo(
            cc=cc,
            family=row.text("family"),
            note=row.text("note", ""),
            verified=row.flag("verified", True),
        )
    gpus: list[GpuModel] = []
    for row in top.tables("gpu", required=True):
        cc = _cc(row, "cc")
        if cc not in caps:
            raise row.fail(None, f"compute capability {cc} is not in compute_capability")
        gpus.extend(GpuModel(name=n, cc=cc) for n in row.texts("names", None))
    toolkits: list[Toolkit] = []
    for row in top.tables("toolkit", required=True):
        version = _version(row, "version", CudaVersion)
        min_driver = _version(row, "min_driver", DriverVersion)
        compat_driver = _version(row, "compat_driver", DriverVersion)
        ptx_isa = _version(row, "ptx_isa", PtxIsaVersion)
        targets = _ccs(row, "targets", required=True)
        arch_specific = _ccs(row, "arch_specific")
        family_specific = _ccs(row, "family_specific")
        for cc in targets | arch_specific | family_specific:
            if cc not in caps:
                raise row.fail(None, f"target {cc} is not in compute_capability")
        if not (arch_specific | family_specific) <= targets:
            raise row.fail(None, "'a'/'f' targets must also be plain targets")
        removed_table = row.table("removed")
        removed = {name: tuple(sorted(_ccs(removed_table, name))) for name in removed_table}
        renamed_table = row.table("renamed")
        renamed = {
            _parse_cc(renamed_table, old, old): _cc(renamed_table, old) for old in renamed_table
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
                verified=row.flag("verified", True),
            )
        )
    toolkits.sort(key=lambda tk: tk.version)
    if not top.has("ptx_isa_driver"):
        raise top.missing("ptx_isa_driver")
    if not top.has("driver_cuda"):
        raise top.missing("driver_cuda")
    try:
        ptx_isa_driver = {
            PtxIsaVersion.parse(k): CudaVersion.parse(v)
            for k, v in top.text_map("ptx_isa_driver").items()
        }
        driver_cuda = {int(k): CudaVersion.parse(v) for k, v in top.text_map("driver_cuda").items()}
    except (UsageError, ValueError) as exc:
        raise top.fail("ptx_isa_driver/driver_cuda", str(exc)) from None
    integrated: dict[ComputeCapability, IntegratedGpu] = {}
    for row in top.tables("integrated"):
        cc = _cc(row, "cc")
        if cc not in caps:
            raise row.fail(None, f"compute capability {cc} is not in compute_capability")
        same_as = _cc(row, "same_as") if row.has("same_as") else None
        since = (
            _version(row, "desktop_cubins_from", CudaVersion)
            if row.has("desktop_cubins_from")
            else None
        )
        integrated[cc] = IntegratedGpu(cc, same_as, since)
    for cc, info in integrated.items():
        if info.same_as is not None and info.same_as not in integrated:
            raise top.fail("integrated", f"{cc} is the same device as {info.same_as}, not listed")
    pytorch = top.table("pytorch", required=True)
    names = pytorch.typed("arch_names", list)
    if not all(isinstance(n, list) and len(n) == 2 for n in names):
        raise pytorch.expected("arch_names", "a list of [name, arch list] pairs")
    torch_arch_names = tuple((str(a), str(b)) for a, b in names)
    official = pytorch.text_map("official_arch_lists")
    list_sources = pytorch.text_map("official_arch_list_sources")
    missing_source = sorted(set(official) - set(list_sources))
    if missing_source:
        raise pytorch.fail("official_arch_list_sources", f"no source for {missing_source}")
    return CudaFacts(
        facts_version=top.text("facts_version"),
        sources=MappingProxyType(top.text_map("sources")),
        rules=MappingProxyType(top.text_map("rules")),
        capabilities=MappingProxyType(caps),
        gpus=tuple(gpus),
        toolkits=tuple(toolkits),
        ptx_isa_driver=MappingProxyType(ptx_isa_driver),
        driver_cuda=MappingProxyType(driver_cuda),
        torch_arch_names=torch_arch_names,
        official_arch_lists=MappingProxyType(official),
        torch_first_release=MappingProxyType(pytorch.text_map("first_release")),
        integrated=MappingProxyType(integrated),
        official_arch_list_sources=MappingProxyType(list_sources),
        pipeline_arch_lists=MappingProxyType(pytorch.text_map("pipeline_arch_lists")),
        torch_releases=MappingProxyType(pytorch.text_map("releases")),
    )


@cache
def load_facts() -> CudaFacts:
    """The facts shipped with archwheel (cached; the objects are immutable)."""
    text = resources.files("archwheel.facts").joinpath("cuda_facts.toml").read_bytes()
    document = load_document(
        text, origin="cuda_facts.toml", nesting=MAX_FACTS_NESTING, toml=True, error=FactsError
    )
    return parse_facts(cast("dict[str, Any]", document))  # TOML's top level is a table
