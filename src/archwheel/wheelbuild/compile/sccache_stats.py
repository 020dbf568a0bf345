"""What sccache did during a compile phase: its statistics and each step's record.

``sccache --show-stats --stats-format json`` counts hits and misses per sub-phase, as sccache
names them: ``C/C++``, ``CUDA`` (the host side of an nvcc call), ``CUDA (Device code)``
(cudafe++), ``PTX`` (cicc, per arch), ``CUBIN`` (ptxas, per arch). Every sub-phase is counted:
a summary of ``C/C++`` and ``CUDA`` alone misreports an nvcc build. With the shared cache the
statistics also hold each storage level's hits (``multi_level``): the Redis level's are the
remote hits.

The daemon's debug log (remote_cache.SERVER_LOG) has one ``[OUTPUT]: compile result: ...``
line per cached step; ``parse_server_log`` turns those into the per-file record (the output
as sccache names it, its sub-phase and hit or miss).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

PHASES = ("C/C++", "CUDA", "CUDA (Device code)", "PTX", "CUBIN")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _counts(stats: Mapping[str, object], key: str) -> dict[str, int]:
    block = stats.get(key)
    counts = block.get("counts") if isinstance(block, dict) else None
    if not isinstance(counts, dict):
        return {}
    return {str(k): _int(v) for k, v in counts.items() if _int(v)}


@dataclass(frozen=True)
class CacheCounts:
    """What the compiler cache did during one compile phase."""

    local_hits: int
    remote_hits: int
    misses: int
    remote_errors: int
    hits_by_phase: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    misses_by_phase: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    errors: int = 0  # cache read/write errors and timeouts, any level
    fallbacks: int = 0  # compiles that ran without the cache because sccache failed

    @property
    def compiles(self) -> int:
        """The cached steps sccache saw: hits of either level plus misses."""
        return self.local_hits + self.remote_hits + self.misses

    @classmethod
    def from_stats(cls, document: Mapping[str, object], *, fallbacks: int = 0) -> CacheCounts:
        """From ``sccache --show-stats --stats-format json`` (an empty mapping: nothing)."""
        raw = document.get("stats")
        stats: Mapping[str, object] = raw if isinstance(raw, dict) else {}
        hits, misses = _counts(stats, "cache_hits"), _counts(stats, "cache_misses")
        remote = remote_errors = 0
        levels = stats.get("multi_level")
        for level in levels if isinstance(levels, list) else ():
            if isinstance(level, dict) and "disk" not in str(level.get("name", "")):
                remote += _int(level.get("hits"))
                remote_errors += _int(level.get("write_failures"))
        total_hits = sum(hits.values())
        remote = min(remote, total_hits)
        errors = (
            sum(_counts(stats, "cache_errors").values())
            + _int(stats.get("cache_read_errors"))
            + _int(stats.get("cache_write_errors"))
            + _int(stats.get("cache_timeouts"))
        )
        return cls(
            local_hits=total_hits - remote,
            remote_hits=remote,
            misses=sum(misses.values()),
            remote_errors=remote_errors,
            hits_by_phase=MappingProxyType(dict(sorted(hits.items()))),
            misses_by_phase=MappingProxyType(dict(sorted(misses.items()))),
            errors=errors,
            fallbacks=fallbacks,
        )

    def rates(self) -> dict[str, float]:
        """The local, remote and miss shares of the steps (all 0 when none), for provenance."""
        total = self.compiles
        if total == 0:
            return {"local": 0.0, "remote": 0.0, "miss": 0.0}
        return {
            "local": round(self.local_hits / total, 4),
            "remote": round(self.remote_hits / total, 4),
            "miss": round(self.misses / total, 4),
        }

    def by_phase(self) -> dict[str, dict[str, int]]:
        """Hits and misses of every sub-phase sccache counted (its own names)."""
        names = sorted(set(self.hits_by_phase) | set(self.misses_by_phase))
        return {
            name: {
                "hits": self.hits_by_phase.get(name, 0),
                "misses": self.misses_by_phase.get(name, 0),
            }
            for name in names
        }

    def describe(self) -> str:
        """One line: the steps, the local hits, remote hits and misses, and the hits of each
        sub-phase (an nvcc build's summary of ``C/C++`` and ``CUDA`` alone misreports it)."""
        phases = ", ".join(
            f"{name} {row['hits']}/{row['hits'] + row['misses']}"
            for name, row in self.by_phase().items()
        )
        return (
            f"{self.compiles} cached steps: {self.local_hits} local hits, {self.remote_hits} "
            f"remote hits, {self.misses} misses"
            + (f" (hits by sub-phase: {phases})" if phases else "")
        )


def parse_stats_json(text: str) -> dict[str, object]:
    """The JSON document of ``--show-stats --stats-format json``; {} when it is not one."""
    try:
        document = json.loads(text)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


@dataclass(frozen=True)
class CompileRecord:
    """One cached step as sccache's log tells it: its output (sccache names the file without
    its folder), the sub-phase, and ``hit`` or ``miss``."""

    file: str
    phase: str
    result: str

    def to_json_dict(self) -> dict[str, str]:
        """The step as one entry of the provenance's ``compiles`` list."""
        return {"file": self.file, "phase": self.phase, "result": self.result}


_RESULT = re.compile(r"\] \[(?P<name>[^\]\n]{1,1000})\]: compile result: (?P<result>[a-z ]+)$")
_RESULTS = {"cache hit": "hit", "cache miss": "miss"}


def phase_of(name: str, *, nvcc_outputs: frozenset[str] = frozenset()) -> str:
    """The sub-phase of a step by its output: the device steps by suffix, the host side of an
    nvcc call by its being the output of an uncacheable (decomposed) call."""
    if name.endswith(".ptx"):
        return "PTX"
    if name.endswith(".cubin"):
        return "CUBIN"
    if name.endswith(".module_id"):
        return "CUDA (Device code)"
    return "CUDA" if name in nvcc_outputs else "C/C++"


def parse_server_log(text: str, *, limit: int = 100_000) -> tuple[CompileRecord, ...]:
    """The cached steps in the daemon's log (at most ``limit``). An nvcc call sccache takes
    apart ends with ``[OUTPUT]: compile result: not cacheable`` after its host step's own hit
    or miss: that step is counted as ``CUDA``."""
    steps: list[tuple[str, str]] = []
    uncacheable: set[str] = set()
    for line in text.splitlines():
        m = _RESULT.search(line.rstrip())
        if not m:
            continue
        name, result = m.group("name"), m.group("result").strip()
        if result in _RESULTS:
            if len(steps) < limit:
                steps.append((name, _RESULTS[result]))
        elif result == "not cacheable":
            uncacheable.add(name)
    outer = frozenset(uncacheable)
    return tuple(CompileRecord(n, phase_of(n, nvcc_outputs=outer), r) for n, r in steps)
