"""A build's compile farm, from the probe before compiling to the provenance record after.

The plan names the farm (``BuildPlan.farm``, from ``--dist-scheduler``/``--dist-token-file``);
the runner, before the compile phase:

- ``check_plan_farm`` asks the scheduler (``dist_farm.check_farm``): a wrong token stops the
  build (exit 2), an unreachable one is a warning and the plan without the farm
  (``without_farm``), or with ``--dist-required`` a refusal (exit 4);
- ``farm_route`` is the ``FarmProxy`` the build runs beside (like the Redis relay): its socket
  folder is mounted at ``FARM_MOUNT`` in the compile container only, and the token is added by
  it on the host;
- ``write_container_config`` writes the container's client configuration into the work folder
  (a placeholder token: ``dist_farm.container_farm``);
- ``farm_record`` is provenance's ``farm``: the scheduler (never the token), the jobs per
  build server, those compiled locally and the farm's errors (farm_record.py), and what the
  route let through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from archwheel.effects.farm_proxy import FarmProxy
from archwheel.wheelbuild.compile.dist_farm import (
    CLIENT_CONFIG,
    FARM_MOUNT,
    TOOLCHAINS_DIR,
    DistFarm,
    SchedulerStatus,
    check_farm,
    container_farm,
    container_farm_env,
    write_client_config,
)
from archwheel.wheelbuild.compile.farm_record import farm_jobs
from archwheel.wheelbuild.planning.plan import BUILD, BuildPlan

_FARM_VARIABLES = frozenset(container_farm_env())


def without_farm(plan: BuildPlan) -> BuildPlan:
    """The same plan compiling locally: no farm, none of its variables in any step."""
    if plan.farm is None:
        return plan

    def strip(env: Mapping[str, str]) -> Mapping[str, str]:
        return MappingProxyType({k: v for k, v in env.items() if k not in _FARM_VARIABLES})

    phases = tuple(
        dataclasses.replace(
            phase,
            steps=tuple(dataclasses.replace(step, env=strip(step.env)) for step in phase.steps),
        )
        for phase in plan.phases
    )
    return dataclasses.replace(plan, phases=phases, build_env=strip(plan.build_env), farm=None)


def check_plan_farm(
    plan: BuildPlan,
    line: Callable[[str], None],
    warn: Callable[[str], None],
    *,
    check: Callable[[DistFarm, Callable[[str], None]], SchedulerStatus] = check_farm,
) -> tuple[BuildPlan, dict[str, object] | None]:
    """Probe the plan's farm before compiling: the plan to build with and the start of its
    provenance record (None: no farm asked for). A wrong token raises ``UsageError`` (exit 2),
    an unreachable farm with ``--dist-required`` ``FarmUnavailable`` (exit 4); otherwise an
    unreachable farm is one ``warn`` line and the plan without it."""
    farm = plan.farm
    if farm is None:
        return plan, None
    warned: list[str] = []

    def keep(text: str) -> None:
        warned.append(text)
        warn(text)

    status = check(farm, keep)
    record: dict[str, object] = {"scheduler": farm.scheduler_url, "required": farm.required}
    if warned:
        return without_farm(plan), {**record, "used": False, "why": warned[0]}
    line(f"compile farm: {farm.scheduler_url} answers, {status.servers} build server(s)")
    return plan, {**record, "used": True, "servers_at_start": status.servers, "via": FARM_MOUNT}


def farm_route(plan: BuildPlan, work_root: Path | None) -> FarmProxy | None:
    """The farm route (not yet started: enter it) the plan's compile container reaches the farm
    through; None without a farm."""
    if plan.farm is None:
        return None
    return FarmProxy(
        plan.farm.scheduler_url, plan.farm.token, parent=work_root, owner=plan.build_user
    )


def write_container_config(plan: BuildPlan, work: Path) -> Path | None:
    """The compile container's sccache client configuration, in the work folder at
    ``CLIENT_CONFIG`` (mode 0600): the farm's scheduler as the route reads it and a placeholder
    token. None without a farm."""
    if plan.farm is None:
        return None
    path = work / CLIENT_CONFIG.removeprefix(BUILD + "/")
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_client_config(path, container_farm(plan.farm), TOOLCHAINS_DIR)


def farm_record(
    start: Mapping[str, object] | None,
    stats_document: Mapping[str, object],
    route: FarmProxy | None,
) -> dict[str, object] | None:
    """Provenance's ``farm``: ``start`` (``check_plan_farm``'s record) with the jobs per build
    server, the local ones and the farm's errors from sccache's statistics, and what the route
    let through and refused. None without a farm."""
    if start is None:
        return None
    record = dict(start)
    raw = stats_document.get("stats")
    stats: Mapping[str, object] = raw if isinstance(raw, dict) else {}
    record["jobs"] = farm_jobs(stats).to_json()
    if route is not None:
        record["route"] = {
            "scheduler_requests": route.scheduler_requests,
            "tunnels": dict(sorted(route.tunnels.items())),
            "refused": route.refused_count,
            "refusals": list(route.refused),
        }
    return record


def farm_warnings(record: Mapping[str, object] | None) -> list[str]:
    """One line when jobs sent to the farm failed there and were compiled locally."""
    if record is None or not record.get("used"):
        return []
    jobs = record.get("jobs")
    errors = jobs.get("errors", 0) if isinstance(jobs, dict) else 0
    if isinstance(errors, int) and errors > 0:
        return [f"compile farm: {errors} job(s) failed on the farm and were compiled locally"]
    return []
