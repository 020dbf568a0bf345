"""What a build says about its compiler cache after the compile: one warning per thing that cost
the cache (never the wheel): compiles sccache could not run, a volume with no room left, a shared
cache server that failed while the relay answered for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archwheel.effects.redis_relay import UnixRelay
    from archwheel.wheelbuild.compile.sccache_stats import CacheCounts
    from archwheel.wheelbuild.planning.plan import BuildPlan
    from archwheel.wheelbuild.run.workfolder import Built, CacheRoom

# A compiler cache is nearly full when less than this is free on its file system, or less
# than a tenth of a file system smaller than ten times this: the next object may not fit.
CACHE_ROOM_LOW = 256 * 2**20


def cache_nearly_full(room: CacheRoom) -> bool:
    """Whether the cache volume's file system has too little room for the next objects."""
    return room.free < min(CACHE_ROOM_LOW, room.size // 10)


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def cache_warnings(
    plan: BuildPlan, counts: CacheCounts, built: Built, relay: UnixRelay | None
) -> list[str]:
    """The warnings of one build's compiler cache, each one line."""
    said: list[str] = []
    if built.fallbacks:
        said.append(
            f"compiler cache: {len(built.fallbacks)} compiles ran without it because "
            f"sccache failed (first: {built.fallbacks[0][:160]}); the wheel is not affected"
        )
    room = built.cache_room
    if plan.ccache_volume is not None and room is not None and cache_nearly_full(room):
        said.append(
            f"compiler cache: the file system of volume {plan.ccache_volume} has "
            f"{_mib(room.free)} free of {_mib(room.size)} after the compile: objects that "
            "did not fit were compiled and not stored (the wheel is not affected); give it "
            f"room (`{plan.engine} volume rm {plan.ccache_volume}` empties it) or a "
            f"--cache-size ({plan.ccache_size} now) below the size of its file system"
        )
    remote = plan.remote_cache
    if remote is not None and relay is not None and (counts.remote_errors or relay.failures):
        said.append(
            f"compiler cache: {counts.remote_errors + relay.failures} remote-cache errors "
            f"during the build ({relay.failures} requests to {remote.redacted()} failed or "
            "timed out: server down, slow or not Redis?); the relay answered them as an "
            "empty cache and those compiles went on without it"
        )
    return said
