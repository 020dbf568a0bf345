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
from typing import Annotated, Any, TypeVar, cast

from archwheel.errors import FactsError, UsageError
from archwheel.facts.documents import Table, load_document
from archwheel.facts.typed import Document, decode, missing_or_not
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
        """The plain targets this toolkit compiles for, oldest first, for listing."""
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
        """Whether ``cc`` is a compute capability some GPU has (not a typo or a guess)."""
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
        """The architecture family of ``cc`` (``Hopper``); ``unknown`` when not recorded."""
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
        """The newest toolkit that can still compile plain SASS for ``cc``; None if none can."""
        found = [tk for tk in self.toolkits if cc in tk.targets]
        return found[-1] if found else None

    def gpus_for(self, cc: ComputeCapability) -> list[str]:
        """The product names of the GPUs with compute capability ``cc``."""
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


class _CapabilityDoc(Document, frozen=True, kw_only=True):
    """One ``[[compute_capability]]``: a capability, its family, a note, whether verified."""

    cc: str
    family: str
    note: str = ""
    verified: bool = True


class _GpuDoc(Document, frozen=True, kw_only=True):
    """One ``[[gpu]]``: product names and their compute capability."""

    cc: str
    names: tuple[str, ...]


class _ToolkitDoc(Document, frozen=True, kw_only=True):
    """One ``[[toolkit]]``: a CUDA release, what it targets, the drivers it needs."""

    version: str
    min_driver: str
    compat_driver: str
    ptx_isa: str
    targets: tuple[str, ...]
    arch_specific: tuple[str, ...] = ()
    family_specific: tuple[str, ...] = ()
    removed: dict[str, tuple[str, ...]] = {}  # noqa: RUF012 (msgspec copies an empty default)
    renamed: dict[str, str] = {}  # noqa: RUF012
    verified: bool = True
    note: str = ""


class _IntegratedDoc(Document, frozen=True, kw_only=True):
    """One ``[[integrated]]``: a Tegra/Jetson capability, its other number, since when
    desktop cubins run there."""

    cc: str
    same_as: str | None = None
    desktop_cubins_from: str | None = None


class _PytorchDoc(Document, frozen=True, kw_only=True):
    """``[pytorch]``: its arch names, official arch lists and their sources, releases."""

    arch_names: Annotated[list[Any], missing_or_not("list")]
    official_arch_lists: dict[str, str] = {}  # noqa: RUF012
    official_arch_list_sources: dict[str, str] = {}  # noqa: RUF012
    pipeline_arch_lists: dict[str, str] = {}  # noqa: RUF012
    first_release: dict[str, str] = {}  # noqa: RUF012
    releases: dict[str, str] = {}  # noqa: RUF012


class _FactsDoc(Document, frozen=True, kw_only=True):
    """The data file (its ``schema_version`` is checked before, in its own words)."""

    schema_version: int
    facts_version: str
    sources: dict[str, str] = {}  # noqa: RUF012
    rules: dict[str, str] = {}  # noqa: RUF012
    compute_capability: tuple[_CapabilityDoc, ...]
    gpu: tuple[_GpuDoc, ...]
    toolkit: tuple[_ToolkitDoc, ...]
    ptx_isa_driver: dict[str, str]
    driver_cuda: dict[str, str]
    integrated: tuple[_IntegratedDoc, ...] = ()
    pytorch: _PytorchDoc


def _cc(table: Table, key: str | int, text: str) -> ComputeCapability:
    """The compute capability ``text`` ("9.0") written at ``key`` of ``table``."""
    try:
        return ComputeCapability.parse(text)
    except UsageError as exc:
        raise table.fail(key, exc.message) from None


def _ccs(table: Table, key: str, texts: tuple[str, ...]) -> frozenset[ComputeCapability]:
    """The compute capabilities listed at ``key``."""
    return frozenset(_cc(table, key, text) for text in texts)


def _version(table: Table, text: str, kind: type[_V]) -> _V:
    """A version (CUDA, driver, PTX ISA) written as a string in the row ``table``."""
    try:
        return kind.parse(text)
    except UsageError as exc:
        raise table.fail(None, exc.message) from None


def parse_facts(data: Mapping[str, Any], origin: str = "cuda_facts.toml") -> CudaFacts:
    """Validate raw facts data and build the frozen model; ``FactsError`` names the key."""
    top = Table(data, origin, FactsError, toml=True)
    if data.get("schema_version") != FACTS_SCHEMA_VERSION:
        raise top.fail("schema_version", f"expected {FACTS_SCHEMA_VERSION}")
    doc = decode(top, _FactsDoc)  # types, required and unknown keys (facts/typed.py)
    caps: dict[ComputeCapability, CapabilityInfo] = {}
    for table, capability in zip(
        top.tables("compute_capability"), doc.compute_capability, strict=True
    ):
        cc = _cc(table, "cc", capability.cc)
        caps[cc] = CapabilityInfo(cc, capability.family, capability.note, capability.verified)
    gpus: list[GpuModel] = []
    for table, gpu in zip(top.tables("gpu"), doc.gpu, strict=True):
        cc = _cc(table, "cc", gpu.cc)
        if cc not in caps:
            raise table.fail(None, f"compute capability {cc} is not in compute_capability")
        gpus.extend(GpuModel(name=n, cc=cc) for n in gpu.names)
    toolkits = sorted(
        (
            _toolkit(table, row, caps)
            for table, row in zip(top.tables("toolkit"), doc.toolkit, strict=True)
        ),
        key=lambda tk: tk.version,
    )
    try:
        ptx_isa_driver = {
            PtxIsaVersion.parse(k): CudaVersion.parse(v) for k, v in doc.ptx_isa_driver.items()
        }
        driver_cuda = {int(k): CudaVersion.parse(v) for k, v in doc.driver_cuda.items()}
    except (UsageError, ValueError) as exc:
        raise top.fail("ptx_isa_driver/driver_cuda", str(exc)) from None
    integrated: dict[ComputeCapability, IntegratedGpu] = {}
    for table, device in zip(top.tables("integrated"), doc.integrated, strict=True):
        cc = _cc(table, "cc", device.cc)
        if cc not in caps:
            raise table.fail(None, f"compute capability {cc} is not in compute_capability")
        same_as = _cc(table, "same_as", device.same_as) if device.same_as is not None else None
        since = device.desktop_cubins_from
        integrated[cc] = IntegratedGpu(
            cc, same_as, _version(table, since, CudaVersion) if since is not None else None
        )
    for cc, info in integrated.items():
        if info.same_as is not None and info.same_as not in integrated:
            raise top.fail("integrated", f"{cc} is the same device as {info.same_as}, not listed")
    pytorch = doc.pytorch
    if not all(isinstance(n, list) and len(n) == 2 for n in pytorch.arch_names):
        raise top.table("pytorch").expected("arch_names", "a list of [name, arch list] pairs")
    missing_source = sorted(
        set(pytorch.official_arch_lists) - set(pytorch.official_arch_list_sources)
    )
    if missing_source:
        raise top.table("pytorch").fail(
            "official_arch_list_sources", f"no source for {missing_source}"
        )
    return CudaFacts(
        facts_version=doc.facts_version,
        sources=MappingProxyType(doc.sources),
        rules=MappingProxyType(doc.rules),
        capabilities=MappingProxyType(caps),
        gpus=tuple(gpus),
        toolkits=tuple(toolkits),
        ptx_isa_driver=MappingProxyType(ptx_isa_driver),
        driver_cuda=MappingProxyType(driver_cuda),
        torch_arch_names=tuple((str(a), str(b)) for a, b in pytorch.arch_names),
        official_arch_lists=MappingProxyType(pytorch.official_arch_lists),
        torch_first_release=MappingProxyType(pytorch.first_release),
        integrated=MappingProxyType(integrated),
        official_arch_list_sources=MappingProxyType(pytorch.official_arch_list_sources),
        pipeline_arch_lists=MappingProxyType(pytorch.pipeline_arch_lists),
        torch_releases=MappingProxyType(pytorch.releases),
    )


def _toolkit(
    table: Table, row: _ToolkitDoc, caps: Mapping[ComputeCapability, CapabilityInfo]
) -> Toolkit:
    """One toolkit from its row, its targets among the known capabilities."""
    version = _version(table, row.version, CudaVersion)
    min_driver = _version(table, row.min_driver, DriverVersion)
    compat_driver = _version(table, row.compat_driver, DriverVersion)
    ptx_isa = _version(table, row.ptx_isa, PtxIsaVersion)
    targets = _ccs(table, "targets", row.targets)
    arch_specific = _ccs(table, "arch_specific", row.arch_specific)
    family_specific = _ccs(table, "family_specific", row.family_specific)
    for cc in targets | arch_specific | family_specific:
        if cc not in caps:
            raise table.fail(None, f"target {cc} is not in compute_capability")
    if not (arch_specific | family_specific) <= targets:
        raise table.fail(None, "'a'/'f' targets must also be plain targets")
    removed_table = table.table("removed")
    renamed_table = table.table("renamed")
    return Toolkit(
        version=version,
        targets=targets,
        arch_specific=arch_specific,
        family_specific=family_specific,
        min_driver=min_driver,
        compat_driver=compat_driver,
        ptx_isa=ptx_isa,
        removed=MappingProxyType(
            {
                name: tuple(sorted(_ccs(removed_table, name, ccs)))
                for name, ccs in row.removed.items()
            }
        ),
        renamed=MappingProxyType(
            {
                _cc(renamed_table, old, old): _cc(renamed_table, old, new)
                for old, new in row.renamed.items()
            }
        ),
        verified=row.verified,
    )


@cache
def load_facts() -> CudaFacts:
    """The facts shipped with archwheel (cached; the objects are immutable)."""
    text = resources.files("archwheel.facts").joinpath("cuda_facts.toml").read_bytes()
    document = load_document(
        text, origin="cuda_facts.toml", nesting=MAX_FACTS_NESTING, toml=True, error=FactsError
    )
    return parse_facts(cast("dict[str, Any]", document))  # TOML's top level is a table
