"""The bounds on what one binary's bytes can make the scan hold, and the budget that counts them.

A binary's headers may lie: millions of container magics, containers that declare millions of
entries, containers nested in each other, ELF headers everywhere, zstd frames that inflate a
thousandfold under ``--deep``. Each bound below is far above real libraries and low enough that
no input exhausts memory or time (docs/limits.md). ``Budget`` is what one binary's
scan has spent of them; the compiled scan applies the same bounds (``compiled_bounds``).

The scan reads each bound from this module when it uses it (``bounds.MAX_ENTRIES``), so that a
test may lower one for a single run.
"""

from __future__ import annotations

from archwheel.binary import speedups

# Real libraries are far below them: torch 2.14.1's biggest library has 475 containers of a
# handful of entries each.
MAX_CONTAINERS = 1 << 16  # container candidates (magic hits) examined per binary
MAX_ENTRIES_PER_CONTAINER = 1 << 14
MAX_ENTRIES = 1 << 18  # entries per binary, all containers together
MAX_LIVE_PARSERS = 4096  # container parsers waiting for bytes at once
MAX_RAW_CUBINS = 1 << 16  # ELF magics (raw cubin candidates) examined per binary
# What --deep inflates for one binary, all payloads together: the larger of 1 GiB and 64x the
# binary's size (libtorch_cuda.so: 5.0 GiB from 479 MiB, 10.7x). Each payload alone is bounded
# (payload.MAX_DEEP_PAYLOAD), and a zstd frame of 64 MiB of zeros is 2 KB: thousands of them
# in a few MB would make `audit --deep` inflate terabytes (estimated, not run).
DEEP_INFLATION_FLOOR = 1 << 30
MAX_DEEP_INFLATION_RATIO = 64
MAX_PROBLEMS_PER_LIBRARY = 20  # notes kept for one library, then "... and N more problems"


def deep_inflation_limit(size: int) -> int:
    """What --deep may inflate for ``size`` bytes of binaries (one binary, or one input's)."""
    return max(DEEP_INFLATION_FLOOR, MAX_DEEP_INFLATION_RATIO * size)


class Budget:
    """What one binary's scan has spent of its bounds, and the limits it has hit (one note each)."""

    def __init__(self, size: int = 0) -> None:
        self.candidates = 0
        self.elf_candidates = 0
        self.entries = 0
        self.live = 0
        self.hit: dict[str, str] = {}
        self.inflation_limit = deep_inflation_limit(size)
        self.inflated = 0  # bytes --deep's payloads may inflate to, declared, so far

    def limit(self, key: str, message: str) -> None:
        """Record that the bound ``key`` was hit; only its first message is kept."""
        self.hit.setdefault(key, message)


def compiled_bounds() -> speedups.Bounds:
    """These bounds, as the compiled scan applies them (read at each call)."""
    return speedups.Bounds(MAX_CONTAINERS, MAX_ENTRIES_PER_CONTAINER, MAX_ENTRIES, MAX_RAW_CUBINS)
