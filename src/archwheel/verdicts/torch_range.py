"""can-load across torch releases, the results: an extension wheel judged against each torch
release a request names (``TorchCheck``), and all of them (``TorchRangeReport``, the document
``can-load --torch`` prints). ``inspection.torch_range`` finds and reads the torch wheels (by
ranges from the indexes pip is configured with, their loader views kept in the cache) and hands
each to ``verdicts.load.judge_load``; these types only hold and summarize what it found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archwheel._version import __version__
from archwheel.verdicts.load import LoadReport, LoadVerdict, WheelFiles


@dataclass(frozen=True)
class TorchCheck:
    """The extension judged against one torch release (``report`` None: it could not be)."""

    version: str
    filename: str
    location: str
    size: int | None
    report: LoadReport | None
    error: str | None = None
    fetched: int = 0  # bytes read from the network for this torch, this run
    requests: int = 0
    whole_download: bool = False  # the server refused ranges
    cached: bool = False  # the loader's view came from the cache folder

    @property
    def verdict(self) -> LoadVerdict:
        """The load verdict against this release; UNKNOWN when it could not be judged."""
        return LoadVerdict.UNKNOWN if self.report is None else self.report.verdict


@dataclass(frozen=True)
class TorchRangeReport:
    """``can-load --torch``: the extension against every torch release the request admits."""

    wheel: WheelFiles
    request: str
    interpreter: str
    machine: str
    indexes: tuple[str, ...]
    checks: tuple[TorchCheck, ...]
    not_found: tuple[str, ...] = ()  # exact versions asked for that no index has
    # Every public release with a wheel for this interpreter and machine on the indexes, asked
    # for or not (a build's range claim and ``matrix --recheck`` compare against it).
    available: tuple[str, ...] = ()

    @property
    def verdict(self) -> LoadVerdict:
        """FAILS when any release fails, else UNKNOWN when a release could not be judged, an exact
        version was not found or none was checked, else LOADS."""
        verdicts = {c.verdict for c in self.checks}
        if LoadVerdict.FAILS in verdicts:
            return LoadVerdict.FAILS
        if LoadVerdict.UNKNOWN in verdicts or self.not_found or not self.checks:
            return LoadVerdict.UNKNOWN
        return LoadVerdict.LOADS

    @property
    def loads_with(self) -> tuple[str, ...]:
        """The releases the extension loads with."""
        return tuple(c.version for c in self.checks if c.verdict is LoadVerdict.LOADS)

    @property
    def fetched(self) -> int:
        """The bytes read from the network for every release, this run."""
        return sum(c.fetched for c in self.checks)

    @property
    def total_size(self) -> int:
        """The size of every torch wheel judged, what a full download would have cost."""
        return sum(c.size or 0 for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        """The ``can-load --torch`` JSON document."""
        return {
            "schema_version": 1,
            "kind": "can-load-torch-range",
            "tool": {"name": "archwheel", "version": __version__},
            "wheel": self.wheel.filename,
            "torch": self.request,
            "python": self.interpreter,
            "machine": self.machine,
            "indexes": list(self.indexes),
            "verdict": self.verdict.value,
            "loads_with": list(self.loads_with),
            "not_found": list(self.not_found),
            "available": list(self.available),
            "bytes_fetched": self.fetched,
            "bytes_of_wheels": self.total_size,
            "torches": [
                {
                    "version": c.version,
                    "filename": c.filename,
                    "location": c.location,
                    "size": c.size,
                    "verdict": c.verdict.value,
                    "error": c.error,
                    "bytes_fetched": c.fetched,
                    "requests": c.requests,
                    "whole_download": c.whole_download,
                    "cached": c.cached,
                    "report": None if c.report is None else c.report.to_json(),
                }
                for c in self.checks
            ],
        }
