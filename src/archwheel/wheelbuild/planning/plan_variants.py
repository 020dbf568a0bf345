"""Variants of a made plan: the reproducibility check's serial build (``serial_variant``) and
the plan without an unreachable remote cache (``without_remote_cache``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from archwheel.wheelbuild.compile.parallel import choose_parallel, without_threads
from archwheel.wheelbuild.planning.plan import TREE_STEPS, BuildPlan, apply_parallel


def serial_variant(plan: BuildPlan) -> BuildPlan:
    """The same build, one compile at a time and nvcc without ``--threads``: the
    reproducibility check's second build, so that it proves the parallel build's bytes equal
    a serial build's."""
    if plan.parallel is None:
        return plan
    recipe = plan.recipe
    env = dict(plan.build_env)
    for name, _ in plan.parallel.env:
        if name == "NVCC_APPEND_FLAGS":  # the flags before --threads (compression included)
            unthreaded = without_threads(env.get(name, ""))
            if unthreaded:
                env[name] = unthreaded
            else:
                env.pop(name, None)
        elif name in recipe.build.env:
            env[name] = recipe.build.env[name]
        else:
            env.pop(name, None)
    serial = choose_parallel(recipe.build.parallel, plan.jobs, archs=len(plan.arch_list),
                             ninja_off=(), serial=True,
                             recipe_env=dict(recipe.build.env))  # fmt: skip
    apply_parallel(env, recipe, serial)
    env = dict(sorted(env.items()))
    phases = tuple(
        dataclasses.replace(
            phase,
            steps=tuple(
                dataclasses.replace(step, env=MappingProxyType(env))
                if step.name in TREE_STEPS
                else step
                for step in phase.steps
            ),
        )
        for phase in plan.phases
    )
    return dataclasses.replace(
        plan, build_env=MappingProxyType(env), phases=phases, parallel=serial
    )


def without_remote_cache(plan: BuildPlan) -> BuildPlan:
    """The same plan with the local compiler cache only (the remote one is unreachable)."""
    if plan.remote_cache is None:
        return plan

    def strip(env: Mapping[str, str]) -> Mapping[str, str]:
        return MappingProxyType({k: v for k, v in env.items() if k != "ARCHWHEEL_CACHE_SOCKET"})

    phases = tuple(
        dataclasses.replace(
            phase,
            steps=tuple(dataclasses.replace(step, env=strip(step.env)) for step in phase.steps),
        )
        for phase in plan.phases
    )
    return dataclasses.replace(
        plan, phases=phases, build_env=strip(plan.build_env), remote_cache=None
    )
