"""The provenance file written beside every built wheel (``<wheel>.provenance.json``).

It records what the wheel was built from and how, so that a wheel can be traced and rebuilt:
the recipe and its sha256, the source (kind, location, ref, commit, content hash), the base
image and builder image IDs, the toolchain versions read inside the container, the arch list
and how it entered the build, the build environment and command, ``SOURCE_DATE_EPOCH``, the job
count, the timings, the compiler cache statistics, the wheel's sha256, the audit gate's
verdict and, for a build against a pinned torch, the load gate's (``load``). ``schema_version``
changes when a field changes meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from archwheel import __version__

PROVENANCE_SCHEMA_VERSION = 1
PROVENANCE_SUFFIX = ".provenance.json"


@dataclass(frozen=True)
class ImageRecord:
    base: str
    base_id: str
    builder: str
    builder_id: str
    base_repo_digests: tuple[str, ...] = ()
    base_pinned_id: str | None = None  # the recipe's base_image_id (None: a floating tag)


def provenance_path(wheel: Path) -> Path:
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
