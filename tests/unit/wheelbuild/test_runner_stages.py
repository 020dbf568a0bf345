"""The runner's stages without containers: one timing mechanism, the provenance made from the
run's results, the gates deciding where the wheel goes, and a remote cache that is down
changing the plan the caller builds with (never the runner's own).

The images and the build in containers are replaced by fakes (their own modules are tested on
docker in tests/integration); everything after them runs for real.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import MappingProxyType

import pytest

from archwheel.errors import BuildError
from archwheel.facts.arch import ArchList
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild import BuildOutput, BuildPlan, BuildRequest, build_wheel
from archwheel.wheelbuild import runner as runner_module
from archwheel.wheelbuild.compile.remote_cache import parse_cache_url
from archwheel.wheelbuild.images.builder_image import BuilderImage, Toolchain
from archwheel.wheelbuild.planning.plan_variants import without_remote_cache
from archwheel.wheelbuild.run.stages import Timings
from archwheel.wheelbuild.run.workfolder import Built
from archwheel.wheelbuild.runner import BuildRunner
from archwheel.wheelbuild.wheel.gate import GateVerdict
from archwheel.wheelbuild.wheel.repair import spec_for_recipe
from tests.support.index_wheels import make_dist

TOOLCHAIN = Toolchain(
    nvcc="13.0.88", cuda=CudaVersion.parse("13.0"), gcc="12.2.0", python="3.11.2", pip="24.0",
    sccache="0.16.0", glibc="2.36", os="debian 12", cuda_home="/usr/local/cuda", source="pypi",
    raw=MappingProxyType({}),
)  # fmt: skip


class FakeEngine:
    def version(self) -> str:
        return "27.0"

    def repo_digests(self, reference: str) -> list[str]:
        return []


class FakeWork:
    """One build in containers: a real wheel in the staging folder, no container."""

    def __init__(self) -> None:
        self.plans: list[BuildPlan] = []

    def build_once(
        self, plan: BuildPlan, builder: BuilderImage, staging: Path, *_: object, **__: object
    ) -> Built:
        self.plans.append(plan)
        wheel = make_dist(staging, "demo", "1.0")
        stats = MappingProxyType(
            {
                "stats": {
                    "cache_hits": {"counts": {"PTX": 2}},
                    "cache_misses": {"counts": {"CUDA": 1}},
                }
            }
        )
        return Built(wheel, MappingProxyType({"prepare": 0.5, "compile": 2.0}), stats)


class Stages:
    def __init__(self) -> None:
        self.names: list[str] = []

    def stage(self, name: str, description: str) -> None:
        self.names.append(name)


def _plan(tmp_path: Path, **request: object) -> BuildPlan:
    fields = {"recipe": "example", "out": tmp_path / "out", "plan_only": True, **request}
    return build_wheel(BuildRequest(**fields)).plan  # type: ignore[arg-type]


def _gate_report(wheel: Path) -> dict[str, object]:
    """An audit document as the gate writes it: it names the wheel it audited."""
    return {"inputs": [{"source": str(wheel), "libraries": []}]}


def _runner(
    plan: BuildPlan, tmp_path: Path, gate_ok: bool = True
) -> tuple[BuildRunner, FakeWork, io.StringIO]:
    log = io.StringIO()
    runner = BuildRunner(
        plan,
        FakeEngine(),  # type: ignore[arg-type]
        BuildOutput(log),
        repair=spec_for_recipe(plan.recipe),
        docker_dir=tmp_path,
        work_root=tmp_path,
        gate=lambda wheel, arch: GateVerdict(
            ok=gate_ok, summary="2 of 2 archs", report=_gate_report(wheel)
        ),
    )
    images = runner_module._Images(
        "sha256:base", BuilderImage("builder:1", "sha256:builder", "base", "sha256:base", False),
        TOOLCHAIN,
    )  # fmt: skip
    runner._images = lambda timings: images  # type: ignore[method-assign]
    work = FakeWork()
    runner.work = work  # type: ignore[assignment]
    return runner, work, log


def test_timings_time_named_stages_with_one_clock() -> None:
    timings, stages = Timings(), Stages()
    with timings.stage(stages, "base-image", "pull"):
        pass
    with timings.stage(stages, "engine", "check", timed=False):
        pass
    with timings.timed("repair"):
        pass
    timings.finish()
    assert stages.names == ["base-image", "engine"]
    assert list(timings.frozen()) == ["base_image", "repair", "total"]
    with pytest.raises(RuntimeError), timings.timed("audit"):
        raise RuntimeError("a failed stage records no figure")
    assert "audit" not in timings.frozen()


def test_a_run_delivers_the_audited_wheel_with_its_provenance(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    runner, work, log = _runner(plan, tmp_path)
    result = runner.run()
    assert result.wheel == plan.out_dir / "demo-1.0-py3-none-any.whl" and result.wheel.is_file()
    provenance = json.loads(result.provenance.read_text())
    # the example recipe has a [repair] table: the repair step ran on the fake build's wheel
    assert list(provenance["timings_s"]) == ["prepare", "compile", "repair", "audit", "total"]
    assert list(result.timings) == list(provenance["timings_s"])
    assert provenance["wheel"]["sha256"] == result.sha256
    assert provenance["images"]["builder"] == "builder:1"
    assert provenance["engine"] == {"name": "docker", "version": "27.0"}
    assert provenance["arch"]["requested"] == str(plan.arch_list)
    assert provenance["audit"] == {"ok": True, "summary": "2 of 2 archs"}
    assert provenance["compiler_cache"]["local_hits"] == 2
    assert provenance["compiler_cache"]["misses"] == 1
    assert list(provenance)[-1] == "repair" and provenance["repair"]["wheel"] == result.wheel.name
    # what the project declares (the example's pyproject.toml: no requires-python, no torch)
    assert provenance["project"]["files"] == ["pyproject.toml"]
    assert provenance["project"]["requires_python"] is None
    # the plan's predictions against the wheel: its real tag and requirements, recorded
    compared = provenance["plan_vs_wheel"]
    assert compared["wheel"]["tag"] == "py3-none"
    assert compared["differences"] == [], compared
    assert dict(result.cache_stats)["local_hits"] == 2
    assert work.plans == [plan]
    assert "== engine: check docker" in log.getvalue()
    assert "audit: passed: 2 of 2 archs" in log.getvalue()


def test_a_wheel_the_audit_refuses_goes_to_rejected(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    runner, _, _ = _runner(plan, tmp_path, gate_ok=False)
    with pytest.raises(BuildError, match="failed the audit gate"):
        runner.run()
    rejected = plan.out_dir / "rejected"
    assert (rejected / "demo-1.0-py3-none-any.whl").is_file()
    assert (rejected / "demo-1.0-py3-none-any.whl.audit.json").is_file()
    report = json.loads((rejected / "demo-1.0-py3-none-any.whl.audit.json").read_text())
    # the report names the wheel kept in rejected/, not the staging copy it audited
    assert {i["source"] for i in report["inputs"]} == {str(rejected / "demo-1.0-py3-none-any.whl")}
    assert not (plan.out_dir / "demo-1.0-py3-none-any.whl").exists()


def test_an_unreachable_remote_cache_changes_the_plan_built_with_not_the_runners(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(tmp_path, cache_url=parse_cache_url("redis://127.0.0.1:9"))
    assert plan.remote_cache is not None
    monkeypatch.setattr(runner_module, "probe", lambda address: "connection refused")
    runner, work, log = _runner(plan, tmp_path)
    checked, record = runner._check_remote_cache(plan)
    assert checked == without_remote_cache(plan) and checked.remote_cache is None
    assert record is not None and record["used"] is False
    assert runner.plan is plan  # the runner's own plan is left as it was given
    result = runner.run()
    assert work.plans == [without_remote_cache(plan)]  # the build got the checked plan
    assert "unreachable" in log.getvalue()
    remote = json.loads(result.provenance.read_text())["compiler_cache"]["remote"]
    assert remote["used"] is False and remote["errors"] == 0


def test_the_arch_list_reaches_the_gate_as_the_plan_holds_it(tmp_path: Path) -> None:
    plan = _plan(tmp_path, arch="9.0")
    seen: list[ArchList] = []
    runner, _, _ = _runner(plan, tmp_path)

    def gate(wheel: Path, arch: ArchList) -> GateVerdict:
        seen.append(arch)
        return GateVerdict(ok=True, summary="ok")

    runner.gate = gate
    runner.run()
    assert seen == [plan.arch_list] and str(seen[0]) == "9.0"
