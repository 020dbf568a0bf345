"""Where a build's compile jobs ran, from sccache's own statistics (provenance's farm record).

``sccache --show-stats --stats-format json`` (0.16.0) counts, in ``stats``:

- ``dist_compiles``: a map from build server address (as the scheduler hands it out,
  ``HOST:PORT``) to the jobs that ran there and came back: the per-server count;
- ``dist_errors``: jobs sent to the farm that failed there (a server gone, a toolchain upload
  cut off) and were compiled locally instead;
- ``compilations``: every compile the daemon ran or had run, distributed or not.

So the jobs compiled on this machine are ``compilations`` less the distributed ones. They
include the outer ``nvcc`` call of every decomposed compile (sccache runs it itself and never
sends it out), every link-free host compile the farm did not take, and every ``dist_errors``
job; cache hits are no compilation at all. sccache does not say *which* job ran where (its log
does, at debug level): the record is counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FarmJobs:
    """Compile jobs per build server address, those run locally, and farm failures."""

    per_server: Mapping[str, int] = field(default_factory=dict)
    local: int = 0
    errors: int = 0

    @property
    def distributed(self) -> int:
        """The jobs that ran on a build server."""
        return sum(self.per_server.values())

    def to_json(self) -> dict[str, object]:
        """The provenance form: ``{"servers": {ADDR: N}, "local": N, "errors": N}``."""
        return {
            "servers": dict(sorted(self.per_server.items())),
            "local": self.local,
            "errors": self.errors,
        }


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def farm_jobs(stats: Mapping[str, object]) -> FarmJobs:
    """The ``FarmJobs`` of sccache's ``stats`` object (missing or malformed counts: 0)."""
    raw = stats.get("dist_compiles")
    per_server = (
        {str(addr): _count(n) for addr, n in raw.items() if _count(n) > 0}
        if isinstance(raw, Mapping)
        else {}
    )
    distributed = sum(per_server.values())
    return FarmJobs(
        per_server=per_server,
        local=max(0, _count(stats.get("compilations")) - distributed),
        errors=_count(stats.get("dist_errors")),
    )
