"""The provenance file written beside every built wheel (``<wheel>.provenance.json``).

It records what the wheel was built from and how, so that a wheel can be traced and rebuilt:
the recipe and its sha256, the source (kind, location, ref, commit, content hash), the base
image and builder image IDs, the toolchain versions read inside the container, the arch list
and how it entered the build, the build environment and command, ``SOURCE_DATE_EPOCH``, the job
count, the timings, the compiler cache statistics, the wheel's sha256, the audit gate's
verdict and, for a build against a pinned torch, the load gate's (``load``), and the plan's
predictions against what the wheel says (``plan_vs_wheel``: its real tag, build number,
Requires-Python and torch requirement, one line per difference). ``schema_version`` changes
when a field changes meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archwheel._version import __version__

if TYPE_CHECKING:  # the types only: this module stays cheap to import (provenance_path)
    from archwheel.wheelbuild.compile.sccache_stats import CacheCounts
    from archwheel.wheelbuild.images.builder_image import Toolchain
    from archwheel.wheelbuild.planning.plan import BuildPlan
    from archwheel.wheelbuild.run.workfolder import Built
    from archwheel.wheelbuild.wheel.gate import GateVerdict, LoadGateVerdict, RangeGateVerdict
    from archwheel.wheelbuild.wheel.reproducible import WheelComparison

PROVENANCE_SCHEMA_VERSION = 1
PROVENANCE_SUFFIX = ".provenance.json"


@dataclass(frozen=True)
class ImageRecord:
    """The base and builder images of a build, by tag and ID, for the provenance's ``images``."""

    base: str
    base_id: str
    builder: str
    builder_id: str
    base_repo_digests: tuple[str, ...] = ()
    base_pinned_id: str | None = None  # the recipe's base_image_id (None: a floating tag)


def provenance_path(wheel: Path) -> Path:
    """Where the provenance of ``wheel`` is written: beside it, ``WHEEL.provenance.json``."""
    return wheel.with_name(wheel.name + PROVENANCE_SUFFIX)


def provenance_document(
    *,
    wheel_name: str,
    wheel_sha256: str,
    wheel_size: int,
    recipe: Mapping[str, object],
    source: Mapping[str, object],
    images: ImageRecord,
    toolchain: Mapping[str, str],
    arch: Mapping[str, object],
    python: str,
    environment: Mapping[str, str],
    command: str,
    source_date_epoch: int,
    engine: Mapping[str, str],
    jobs: Mapping[str, object],
    network_during_compile: bool,
    timings: Mapping[str, float],
    compiler_cache: Mapping[str, object],
    audit: Mapping[str, object],
    reproducibility: Mapping[str, object] | None,
    smoke_snippet: str | None,
    started_at: str,
    torch: Mapping[str, object] | None = None,
    load: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The provenance JSON document of one built wheel, from already recorded values."""
    return {
        "schema_version": PROVENANCE_SCHEMA_VERSION,
        "archwheel_version": __version__,
        "wheel": {"file": wheel_name, "sha256": wheel_sha256, "size": wheel_size},
        "recipe": dict(recipe),
        "source": dict(source),
        "images": {
            "base": images.base,
            "base_id": images.base_id,
            "base_repo_digests": list(images.base_repo_digests),
            "base_pinned_id": images.base_pinned_id,
            "builder": images.builder,
            "builder_id": images.builder_id,
        },
        "toolchain": dict(toolchain),
        "arch": dict(arch),
        "python": python,
        "environment": dict(environment),
        "command": command,
        "source_date_epoch": source_date_epoch,
        "engine": dict(engine),
        "jobs": dict(jobs),
        "network_during_compile": network_during_compile,
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        "compiler_cache": dict(compiler_cache),
        "audit": dict(audit),
        "reproducibility": dict(reproducibility) if reproducibility is not None else None,
        "smoke": {"snippet": smoke_snippet},
        "started_at": started_at,
        # The torch an extension was built against (build/toolkit.py); None otherwise.
        "torch": dict(torch) if torch is not None else None,
        # can-load against that torch (build/gate.load_gate); None without a pinned torch.
        "load": dict(load) if load is not None else None,
    }


MAX_LISTED = 2000  # nvcc sources named in a provenance (PyTorch's own build compiles ~1500)


@dataclass(frozen=True)
class RunRecord:
    """What a build run found and measured; with its plan, all that its provenance says."""

    started_at: str
    engine_version: str
    images: ImageRecord
    toolchain: Toolchain
    torch_image: Mapping[str, object] | None  # the pinned torch's image, when there is one
    built: Built  # the first build (the delivered wheel's)
    cache_counts: CacheCounts
    remote_cache: Mapping[str, object] | None
    repair: Mapping[str, object] | None
    comparison: WheelComparison | None
    verdict: GateVerdict
    load: LoadGateVerdict | None
    timings: Mapping[str, float]
    torch_range: RangeGateVerdict | None = None  # [torch] loads_with: checks and the claim
    # the compile farm (farm_build.farm_record): its scheduler, never its token; the jobs per
    # build server, those compiled locally, the farm's errors
    farm: Mapping[str, object] | None = None


def provenance_for(
    plan: BuildPlan, wheel: Path, wheel_sha256: str, run: RunRecord
) -> dict[str, object]:
    """The provenance document of ``wheel`` (the staged, final bytes), from its plan and run."""
    recipe = plan.recipe
    counts = run.cache_counts
    document = provenance_document(
        wheel_name=wheel.name,
        wheel_sha256=wheel_sha256,
        wheel_size=wheel.stat().st_size,
        recipe={
            "name": recipe.name,
            "path": str(recipe.path),
            "sha256": recipe.sha256,
            "kind": recipe.kind,
            "version": recipe.version,
        },
        source=plan.source.to_json_dict(),
        images=run.images,
        toolchain=run.toolchain.to_json_dict(),
        arch={
            "requested": str(plan.arch_list),
            "variable": recipe.arch.variable,
            "format": recipe.arch.format,
            "consumer": recipe.arch.consumer,
            "torch_grammar": recipe.arch.torch,
            "value": plan.arch_value,
        },
        python=plan.python,
        environment=dict(plan.build_env),
        command=recipe.build.command.strip(),
        source_date_epoch=plan.source.source_date_epoch,
        engine={"name": plan.engine, "version": run.engine_version},
        jobs={
            "jobs": plan.jobs.jobs,
            "by_cpu": plan.jobs.by_cpu,
            "by_memory": plan.jobs.by_memory,
            "requested": plan.jobs.requested,
            "variable": recipe.build.jobs_variable,
            "parallel": plan.parallel.to_json() if plan.parallel is not None else None,
        },
        network_during_compile=plan.network_during_compile,
        timings=run.timings,
        compiler_cache={
            "volume": plan.ccache_volume,
            "sccache": run.toolchain.sccache,
            "local_hits": counts.local_hits,
            "remote_hits": counts.remote_hits,
            "misses": counts.misses,
            "hit_rates": counts.rates(),
            # every sub-phase sccache counts: C/C++, CUDA, CUDA (Device code), PTX, CUBIN
            "by_phase": counts.by_phase(),
            "errors": counts.errors,
            # compiles that ran without the cache because sccache failed (the wheel is the
            # same: the compiler ran on its own)
            "fallbacks": counts.fallbacks,
            "remote": dict(run.remote_cache) if run.remote_cache is not None else None,
            # nvcc calls answered whole (one lookup, no sccache step) and stored whole
            # (wheelbuild/compile/whole_call.py); the other calls are in the counts above
            "whole_call": {
                "hits": sum(1 for line in run.built.whole_calls if line.startswith("hit ")),
                "stored": sum(1 for line in run.built.whole_calls if line.startswith("store ")),
            },
            # each cached step's output as sccache names it, its sub-phase and whether the
            # cache had it (the sccache daemon's log)
            "compiles": [c.to_json_dict() for c in run.built.compiles],
            # the cache volume's file system after the compile (bytes): a full one stores
            # nothing more, and says so in a warning
            "file_system": run.built.cache_room.to_json_dict()
            if run.built.cache_room is not None
            else None,
            "key": "sccache's own key per step + SCCACHE_C_CUSTOM_CACHE_BUSTER of the toolkit "
            "identity and the environment-carried compiler flags "
            "(wheelbuild/compile/remote_cache.py); an nvcc call's whole: that buster, its "
            "arguments and the files nvcc -M lists (wheelbuild/compile/whole_call.py)"
            if plan.ccache_volume
            else None,
        },
        audit={"ok": run.verdict.ok, "summary": run.verdict.summary},
        reproducibility=run.comparison.to_json_dict() if run.comparison else None,
        smoke_snippet=recipe.smoke_snippet,
        started_at=run.started_at,
        torch=run.torch_image,
        load=run.load.to_json_dict() if run.load is not None else None,
    )
    # What nvcc compiled, by its own record (nvcc_record.py): each source and its SASS archs.
    nvcc = run.built.nvcc
    document["nvcc"] = (
        {
            "record": "nvcc --time (NVCC_APPEND_FLAGS)",
            "truncated": nvcc.truncated,
            "sources": {
                name: sorted(archs) for name, archs in sorted(nvcc.sources.items())[:MAX_LISTED]
            },
            "sources_total": len(nvcc.sources),
            # nvcc's own seconds per phase group over the calls it ran whole; the calls the
            # compiler cache took measure nothing (their rows come from a dry run)
            "phase_seconds": {k: round(v, 2) for k, v in nvcc.phase_seconds.items()},
            "untimed_phases": nvcc.untimed,
        }
        if nvcc is not None
        else None
    )
    # [torch] loads_with: can-load against each release, and the Requires-Dist they backed.
    document["torch_range"] = run.torch_range.to_json_dict() if run.torch_range else None
    # The project's own requires-python and torch requirement, and what the build overrode.
    document["project"] = plan.project.to_json_dict() if plan.project is not None else None
    document["plan_vs_wheel"] = plan_against_wheel(plan, wheel)
    document["farm"] = dict(run.farm) if run.farm is not None else None
    document["repair"] = dict(run.repair) if run.repair is not None else None
    return document


_PREDICTED = {
    "tag": "tag",
    "build": "build number",
    "requires_python": "Requires-Python",
    "torch": "torch requirement",
}


def wheel_says(wheel: Path) -> dict[str, str | None]:
    """What a built wheel says of what the plan predicts: its interpreter-ABI tags (from its
    file name), build number, ``Requires-Python`` and unconditional torch ``Requires-Dist``
    (METADATA)."""
    import zipfile

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import parse_wheel_filename

    from archwheel.binary.coremetadata import parse_core_metadata
    from archwheel.effects.files import open_regular

    _, _, build, tags = parse_wheel_filename(wheel.name)
    with open_regular(wheel) as handle, zipfile.ZipFile(handle) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = parse_core_metadata(archive.read(name).decode("utf-8", errors="replace"))
    torch = []
    for value in metadata.get_all("Requires-Dist"):
        try:
            requirement = Requirement(value)
        except InvalidRequirement:
            continue
        if requirement.name.lower() == "torch" and requirement.marker is None:
            torch.append(value.strip())  # an unconditional one: what the pin replaces
    python = metadata.get("Requires-Python")
    return {
        "tag": ".".join(sorted({f"{t.interpreter}-{t.abi}" for t in tags})),
        "build": "".join(str(part) for part in build),
        "requires_python": python.strip() if python else None,
        "torch": ", ".join(torch) or None,
    }


def _same(key: str, predicted: str, found: str | None) -> bool:
    if key in ("requires_python", "torch") and found is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            strip = "torch" if key == "torch" else ""
            return SpecifierSet(predicted.removeprefix(strip)) == SpecifierSet(
                found.removeprefix(strip)
            )
        except InvalidSpecifier:
            return predicted == found
    return predicted == found


def plan_against_wheel(plan: BuildPlan, wheel: Path) -> dict[str, object] | None:
    """The plan's predictions (tag, build number, Requires-Python, torch requirement), what the
    built wheel says, and one line per difference (None: the plan read no project)."""
    if plan.project is None:
        return None
    predicted = plan.project.predictions()
    if plan.recipe.torch.loads_with:  # the range check states the requirement (torch_range)
        predicted["torch"] = None
    found = wheel_says(wheel)
    differences = compare_predictions(predicted, found)
    return {"predicted": predicted, "wheel": found, "differences": differences}


def compare_predictions(
    predicted: Mapping[str, str | None], found: Mapping[str, str | None]
) -> list[str]:
    """One line per prediction the wheel does not meet (a None prediction: not known)."""
    return [
        f"the wheel's {label} is {found.get(key) or 'absent'}; "
        f"the plan expected {expected or 'none'}"
        for key, label in _PREDICTED.items()
        if (expected := predicted.get(key)) is not None and not _same(key, expected, found.get(key))
    ]


def plan_differences(document: Mapping[str, object]) -> list[str]:
    """The lines a provenance's ``plan_vs_wheel`` records (none: the wheel is as planned)."""
    entry = document.get("plan_vs_wheel")
    found = entry.get("differences") if isinstance(entry, dict) else None
    return [str(line) for line in found] if isinstance(found, list) else []


def swap_path(document: object, old: str, new: str) -> Any:
    """``document`` with every string that names ``old`` (a staged wheel) naming ``new``."""
    if isinstance(document, str):
        return new if document == old else document
    if isinstance(document, Mapping):
        return {key: swap_path(value, old, new) for key, value in document.items()}
    if isinstance(document, (list, tuple)):
        return [swap_path(value, old, new) for value in document]
    return document
