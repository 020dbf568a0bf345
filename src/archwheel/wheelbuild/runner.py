"""Run a ``BuildPlan``: images, containers, the wheel, its provenance, and the audit gate.

The order of events, and what each guarantees:

1. The engine answers (``docker version``), the base image exists (made with debootstrap when
   it is archwheel's own Debian image, pulled otherwise), a base image that should hold the
   toolkit holds the recipe's (``find-cuda.sh --probe`` inside it, before anything is built on
   it), the builder image exists (built when its input hash is new), and its toolkit is the
   recipe's (``nvcc --version`` inside).
2. A fresh work folder is mounted at ``/build``; each plan phase runs in its own container
   (``archwheel-<random>``), removed whatever happens: an error, Ctrl-C, SIGTERM.
3. The single wheel in ``/build/dist`` is re-packed deterministically outside the output folder.
4. With ``--check-reproducible`` steps 2-3 run twice without the compiler cache and the wheels
   are compared; a difference fails the build and names the differing members.
5. The audit gate runs on the staged wheel; for a build against a pinned torch the load gate
   then runs ``can-load`` against that torch's wheel (a wheel that would not load fails the
   build, exit 5, and nothing reaches the output folder). Only then does anything reach the
   output folder: a wheel that passes is copied to a hidden temporary name there and renamed
   into place (atomic), after its provenance file; one that fails the audit goes to
   ``rejected/`` with the audit report and the build fails. So the output folder never holds a
   partial, unaudited or unloadable wheel.

The stages are the methods ``run`` calls in this order, each announced and timed through one
``Timings`` (``stages.py``); one build in containers is ``workfolder.py``; the provenance is made
from the plan and the run's ``RunRecord`` by ``provenance.provenance_for``.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import IO

from packaging.version import Version

from archwheel.effects.engine import ContainerEngine
from archwheel.effects.files import (
    NO_ROOM_ERRNOS,
    copy_into,
    json_bytes,
    place_together,
    sha256_file,
    write_json_atomic,
)
from archwheel.effects.owner import (
    owned_tempdir,
    remove_dead_folders,
    remove_dead_parts,
    remove_owned,
)
from archwheel.effects.paths import cache_dir
from archwheel.effects.redis_relay import UnixRelay, probe
from archwheel.errors import BuildError, ToolError
from archwheel.facts.python_target import PythonTarget
from archwheel.wheelbuild.compile.remote_cache import REMOTE_MOUNT
from archwheel.wheelbuild.compile.sccache_stats import CacheCounts
from archwheel.wheelbuild.images.baseimage import (
    check_base_image_pin,
    ensure_base_image,
    is_local_base,
    suite_of,
)
from archwheel.wheelbuild.images.builder_image import (
    BuilderImage,
    BuilderImageSpec,
    Toolchain,
    check_base_toolkit,
    check_toolchain,
    context_hash,
    ensure_builder_image,
    probe_base_toolkit,
    probe_toolchain,
)
from archwheel.wheelbuild.images.toolkit import ensure_torch_image, image_glibc, manylinux_platforms
from archwheel.wheelbuild.planning.plan import (
    BUILD_SRC,
    BuildPlan,
)
from archwheel.wheelbuild.planning.plan_variants import serial_variant, without_remote_cache
from archwheel.wheelbuild.run.cache_report import cache_warnings
from archwheel.wheelbuild.run.failures import host_out_of_space_error
from archwheel.wheelbuild.run.farm_build import (
    check_plan_farm,
    farm_record,
    farm_route,
    farm_warnings,
    without_farm,
)
from archwheel.wheelbuild.run.output import BuildOutput
from archwheel.wheelbuild.run.provenance import (
    ImageRecord,
    RunRecord,
    plan_differences,
    provenance_for,
    provenance_path,
    swap_path,
)
from archwheel.wheelbuild.run.stages import Timings
from archwheel.wheelbuild.run.workfolder import Built, Configured, WorkFolder
from archwheel.wheelbuild.wheel.gate import (
    AuditGate,
    GateVerdict,
    LoadGate,
    LoadGateVerdict,
    RangeGate,
    RangeGateVerdict,
    RangeRequest,
    audit_gate,
    load_gate,
    range_gate,
)
from archwheel.wheelbuild.wheel.module_gate import ModuleEvidence, check_modules
from archwheel.wheelbuild.wheel.repair import RepairSpec, repair_step
from archwheel.wheelbuild.wheel.reproducible import WheelComparison, compare_wheels, repack_wheel
from archwheel.wheelbuild.wheel.wheel_label import relabel_wheel


@dataclass(frozen=True)
class BuiltWheel:
    """An audited wheel in the output folder, beside its provenance."""

    wheel: Path
    provenance: Path
    sha256: str
    verdict: GateVerdict
    timings: Mapping[str, float]
    comparison: WheelComparison | None = None
    cache_stats: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    smoke_snippet: Path | None = None  # <wheel>.smoke.py, the recipe's [smoke] snippet


@dataclass(frozen=True)
class _Images:
    """The images a build runs in, and the toolkit found inside."""

    base_id: str
    builder: BuilderImage  # the torch image, for a build against a pinned torch
    toolchain: Toolchain
    torch_image: dict[str, object] | None = None  # its provenance record


@dataclass(frozen=True)
class _Run:
    """What every stage after the images works with, for one run."""

    plan: BuildPlan  # the plan built with (the local cache only when the remote one is down)
    images: _Images
    repair: RepairSpec | None
    timings: Timings
    staging: Path


@dataclass(frozen=True)
class _FirstBuild:
    built: Built
    counts: CacheCounts
    remote_cache: dict[str, object] | None
    farm: dict[str, object] | None = None


class BuildRunner:
    """Runs one ``BuildPlan``: its stages in order, each announced on ``output`` and timed."""

    def __init__(
        self,
        plan: BuildPlan,
        engine: ContainerEngine,
        output: BuildOutput,
        *,
        repair: RepairSpec | None,
        docker_dir: Path,
        work_root: Path | None = None,
        gate: AuditGate = audit_gate,
        load_gate: LoadGate = load_gate,
        range_gate: RangeGate = range_gate,
        keep_work: bool = False,
        base_mirror: str | None = None,
        cache: Path | None = None,
        tree: Path | None = None,
    ) -> None:
        self.plan = plan
        self.repair = repair  # the recipe's [repair], resolved with the plan (None: no repair)
        self.base_mirror = base_mirror  # the Debian mirror of a local base image
        self.engine = engine
        self.output = output
        self.docker_dir = docker_dir
        self.work_root = work_root
        self.gate = gate
        self.load_gate = load_gate
        self.range_gate = range_gate
        self.cache = cache  # archwheel's cache folder: what the range gate read of each torch
        self.work = WorkFolder(engine, output, work_root, keep_work, tree)

    # -- the whole build ----------------------------------------------------------------------
    def run(self) -> BuiltWheel:
        """Carry out the plan stage by stage; only a wheel past the gates reaches ``out_dir``."""
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        timings = Timings()
        with timings.stage(self.output, "engine", f"check {self.plan.engine}", timed=False):
            version = self.engine.version()
        for left in remove_dead_folders(self.work_root):
            who = left.owner.describe() if left.owner else "no owner"
            self.output.line(f"removed {left.folder}, left by a build that did not finish ({who})")
        for part in remove_dead_parts(self.plan.out_dir):
            self.output.line(f"removed {part}, a partial file left by a build that did not finish")
        images = self._images(timings)
        self.plan.out_dir.mkdir(parents=True, exist_ok=True)
        # Without the remote cache from here on when its server is unreachable.
        plan, remote_record = self._check_remote_cache(self.plan)
        # Without the farm from here on when it cannot take the jobs (farm_build.py).
        plan, farm_start = check_plan_farm(plan, self.output.line, self.output.warn)
        staging = owned_tempdir("archwheel-stage-", self.work_root)
        run = _Run(plan, images, self.repair, timings, staging)
        try:
            first = self._first_build(run, remote_record, farm_start)
            timings.update(first.built.timings)
            wheel, repair = self._repaired(run, first.built.wheel, staging / "repair-first")
            comparison = self._reproducibility(run, wheel) if plan.check_reproducible else None
            verdict = self._audit(run, wheel, first.built)
            load = self._can_load(run, wheel, verdict)
            wheel, torch_range = self._torch_range(run, wheel, load)
            timings.finish()
            digest = sha256_file(wheel)
            record = RunRecord(
                started_at=started,
                engine_version=version,
                images=ImageRecord(
                    plan.base_image,
                    images.base_id,
                    images.builder.tag,
                    images.builder.image_id,
                    tuple(self.engine.repo_digests(plan.base_image)),
                    plan.recipe.toolchain.base_image_id,
                ),
                toolchain=images.toolchain,
                torch_image=images.torch_image,
                built=first.built,
                cache_counts=first.counts,
                remote_cache=first.remote_cache,
                farm=first.farm,
                repair=repair,
                comparison=comparison,
                verdict=verdict,
                load=load,
                torch_range=torch_range,
                timings=timings.frozen(),
            )
            document = provenance_for(plan, wheel, digest, record)
            for line in plan_differences(document):  # the wheel is not what the plan said
                self.output.warn(line)
            final = self._deliver(plan, wheel, document, record)
            return BuiltWheel(
                smoke_snippet=smoke_snippet_path(final) if plan.recipe.smoke_snippet else None,
                wheel=final,
                provenance=provenance_path(final),
                sha256=digest,
                verdict=verdict,
                timings=record.timings,
                comparison=comparison,
                cache_stats=MappingProxyType(
                    {
                        "local_hits": first.counts.local_hits,
                        "remote_hits": first.counts.remote_hits,
                        "misses": first.counts.misses,
                        "errors": first.counts.errors,
                        "fallbacks": first.counts.fallbacks,
                        "whole_call_hits": sum(
                            1 for line in first.built.whole_calls if line.startswith("hit ")
                        ),
                    }
                ),
            )
        except OSError as exc:
            if exc.errno not in NO_ROOM_ERRNOS:
                raise
            raise host_out_of_space_error(exc, staging.parent) from None
        finally:
            remove_owned(staging)

    def configure(self, libraries: Path | None = None) -> tuple[Configured, Toolchain, str]:
        """A plan that stops after configure (``--stop-after configure``, ``--targets``): the
        images, then the configure step in a work folder; the build files it wrote (a partial
        build's libraries copied into ``libraries``), the toolkit and the builder image's tag."""
        timings = Timings()
        with timings.stage(self.output, "engine", f"check {self.plan.engine}", timed=False):
            self.engine.version()
        images = self._images(timings)
        found = self.work.configure_once(self.plan, images.builder, images.toolchain, libraries)
        return found, images.toolchain, images.builder.tag

    # -- the stages, in the order run() calls them --------------------------------------------
    def _images(self, timings: Timings) -> _Images:
        """The base image, its toolkit (``source = "image"``), the builder image, the toolkit
        inside it and, for a pinned torch, the torch image: all checked before any build."""
        plan = self.plan
        with timings.stage(self.output, "base-image", plan.base_image):
            base_id = self._base_image_id()
        toolchain_spec = plan.recipe.toolchain
        if toolchain_spec.source == "image":
            # Refuse a base image whose toolkit is not the recipe's before building anything
            # on it (provisioning a builder image can take minutes).
            with timings.stage(
                self.output,
                "base-toolkit",
                f"find CUDA {plan.recipe.cuda} in the base image",
                timed=False,
            ):
                found = probe_base_toolkit(
                    self.engine, plan.base_image, plan.recipe.cuda, self.docker_dir
                )
            self.output.line(
                f"{plan.base_image}: {found.cuda_home or 'no toolkit'}"
                + (f", nvcc {found.nvcc}" if found.nvcc else "")
            )
            check_base_toolkit(found, plan.recipe.cuda, plan.recipe.path, plan.base_image)
        with timings.stage(self.output, "builder-image", "docker/Dockerfile on the base image"):
            builder = self._builder_image(base_id)
        toolchain = self._toolchain(builder)
        if plan.torch is None:
            return _Images(base_id, builder, toolchain)
        return self._torch_image(timings, base_id, builder)

    def _toolchain(self, builder: BuilderImage) -> Toolchain:
        """The toolkit inside the builder image must be the recipe's, for the plan's Python."""
        plan = self.plan
        self.output.stage("toolchain", "probe the toolkit inside the builder image")
        toolchain = probe_toolchain(self.engine, builder.tag)
        origin = (
            f"base image {plan.base_image} (builder {builder.tag})"
            if plan.recipe.toolchain.source == "image"
            else f"the PyPI toolchain of {builder.tag}"
        )
        check_toolchain(toolchain, plan.recipe.cuda, plan.recipe.path, origin)
        self.output.line(
            f"nvcc {toolchain.nvcc}, gcc {toolchain.gcc}, python {toolchain.python}, "
            f"sccache {toolchain.sccache}, glibc {toolchain.glibc}"
        )
        if not toolchain.python.startswith(PythonTarget.parse(plan.python).version + "."):
            raise BuildError(
                f"the builder image has Python {toolchain.python}, the plan asks for {plan.python}"
            )
        return toolchain

    def _torch_image(self, timings: Timings, base_id: str, builder: BuilderImage) -> _Images:
        """The pinned torch and its CUDA toolkit, installed once into an image of their own."""
        plan = self.plan
        assert plan.torch is not None
        with timings.stage(
            self.output,
            "torch-image",
            f"torch {plan.torch.wheel.version} and its toolkit (made once)",
        ):
            torch_image = ensure_torch_image(
                self.engine,
                plan.torch,
                builder_tag=builder.tag,
                builder_image_id=builder.image_id,
                python=plan.python,
                toolchain=plan.recipe.toolchain,
                pip=plan.pip,
                sink=self.output.line,
            )
        toolchain = probe_toolchain(self.engine, torch_image.tag)
        check_toolchain(
            toolchain, plan.recipe.cuda, plan.recipe.path, f"torch image {torch_image.tag}"
        )
        self.output.line(
            f"torch image {torch_image.tag}: nvcc {toolchain.nvcc} in {toolchain.cuda_home}"
        )
        record: dict[str, object] = {
            **plan.torch.to_json_dict(),
            "image": torch_image.tag,
            "image_id": torch_image.image_id,
            "image_created": torch_image.created,
        }
        image = BuilderImage(
            torch_image.tag,
            torch_image.image_id,
            builder.base_image,
            builder.base_image_id,
            created=torch_image.created,
        )
        return _Images(base_id, image, toolchain, record)

    def _check_remote_cache(self, plan: BuildPlan) -> tuple[BuildPlan, dict[str, object] | None]:
        """Probe the remote cache's server: the plan to build with and the provenance record.
        Unreachable: say so once, and the plan returned has the local cache only."""
        url = plan.remote_cache
        if url is None:
            return plan, None
        problem = probe(url.address)
        if problem is None:
            self.output.line(f"compiler cache: remote {url.redacted()} answers")
            record: dict[str, object] = {
                "url": url.redacted(),
                "used": True,
                "via": f"relay socket at {REMOTE_MOUNT}",
            }
            return plan, record
        self.output.warn(
            f"compiler cache: the remote cache {url.redacted()} is unreachable ({problem}); "
            "this build goes on without it (local cache only)"
        )
        return without_remote_cache(plan), {
            "url": url.redacted(),
            "used": False,
            "unreachable": problem,
        }

    def _first_build(
        self,
        run: _Run,
        remote_record: dict[str, object] | None,
        farm_start: dict[str, object] | None = None,
    ) -> _FirstBuild:
        """The build whose wheel is delivered, through the remote cache's relay and the farm's
        route when it has them; what the cache and the farm did, with warnings."""
        plan, images = run.plan, run.images
        remote = plan.remote_cache
        relay = (
            UnixRelay(remote.address, db=remote.db, owner=plan.build_user, parent=self.work_root)
            if remote
            else None
        )
        route = farm_route(plan, self.work_root)
        with contextlib.ExitStack() as stack:
            if relay is not None:
                stack.enter_context(relay)
            if route is not None:
                stack.enter_context(route)
            folder = route.folder if route is not None else None
            built = self.work.build_once(plan, images.builder, run.staging / "first",
                                         images.toolchain, relay, farm_folder=folder)  # fmt: skip
        farm = farm_record(farm_start, built.cache_stats, route)
        for warning in farm_warnings(farm):
            self.output.warn(warning)
        stats = built.cache_stats if plan.ccache_volume is not None else {}
        counts = CacheCounts.from_stats(stats, fallbacks=len(built.fallbacks))
        if plan.ccache_volume is not None and counts.compiles:
            self.output.line(f"compiler cache: {counts.describe()}")
        for warning in cache_warnings(plan, counts, built, relay):
            self.output.warn(warning)
        if remote_record is not None:
            remote_record = {**remote_record, "errors": counts.remote_errors}
            if relay is not None:
                remote_record["relay_connections"] = relay.connections
                remote_record["relay_failures"] = relay.failures
        return _FirstBuild(built, counts, remote_record, farm)

    def _repaired(
        self, run: _Run, built: Path, where: Path
    ) -> tuple[Path, dict[str, object] | None]:
        """The wheel after the recipe's ``[repair]`` (unchanged without one), and its record."""
        if run.repair is None:
            return built, None
        where.mkdir(parents=True)
        with run.timings.timed("repair"):
            return repair_step(
                built, run.repair, self.engine, run.images.builder.tag, where,
                user=run.plan.user, source_date_epoch=run.plan.source.source_date_epoch,
                output=self.output,
            )  # fmt: skip

    def _reproducibility(self, run: _Run, wheel: Path) -> WheelComparison:
        """A second build from clean, compared with the first. The delivered wheel is the
        repaired one: both builds are repaired, and the repaired wheels are compared (the
        repair must be reproducible too). The second build is serial (one compile at a time,
        nvcc without ``--threads``): equal bytes prove the parallel build changed nothing."""
        second = self.work.build_once(
            serial_variant(without_farm(run.plan)),  # locally: no route runs beside it
            run.images.builder,
            run.staging / "second",
            run.images.toolchain,
        )
        second_wheel, _ = self._repaired(run, second.wheel, run.staging / "repair-second")
        comparison = compare_wheels(wheel, second_wheel)
        self.output.line(f"reproducibility: {comparison.summary()}")
        return comparison

    def _audit(self, run: _Run, wheel: Path, built: Built) -> GateVerdict:
        plan = run.plan
        arch_list = plan.arch_list
        with run.timings.stage(self.output, "audit", f"audit the wheel against {arch_list}"):
            evidence = ModuleEvidence(
                files=plan.source.files,
                src_root=BUILD_SRC,
                record=built.nvcc,
                # the launcher has nvcc write its record from a --dryrun of every call, the
                # ones the cache answers included: the record alone is the evidence
                cached=(),
                source_rows=plan.source_check,
                selection=plan.selection,
                build_steps=built.build_steps,
            )
            verdict = check_modules(self.gate(wheel, arch_list), plan.recipe, arch_list, evidence)
        self.output.line(f"audit: {'passed' if verdict.ok else 'FAILED'}: {verdict.summary}")
        return verdict

    def _can_load(self, run: _Run, wheel: Path, verdict: GateVerdict) -> LoadGateVerdict | None:
        """Does it load next to the torch it was compiled against? (can-load; a pinned torch
        and a passing audit only)"""
        torch = run.plan.torch
        if torch is None or not verdict.ok:
            return None
        with run.timings.stage(self.output, "can-load", f"can-load against {torch.wheel.filename}"):
            load = self.load_gate(wheel, torch.wheel.path)
        self.output.line(f"can-load: {load.verdict}: {load.summary}")
        return load

    def _torch_range(
        self, run: _Run, wheel: Path, load: LoadGateVerdict | None
    ) -> tuple[Path, RangeGateVerdict | None]:
        """``[torch] loads_with``: can-load against each other release, and the wheel with the
        ``Requires-Dist`` those that passed back (the same wheel when only its own torch did)."""
        torch = run.plan.torch
        if torch is None or not torch.loads_with or load is None or not load.ok:
            return wheel, None
        own = Version(torch.wheel.version).public
        others = [v for v in torch.loads_with if Version(v) != Version(own)]
        with run.timings.stage(
            self.output, "torch-range", f"can-load against torch {', '.join(others) or 'none'}"
        ):
            request = RangeRequest(
                built=torch.wheel.version, loads_with=torch.loads_with, python=run.plan.python,
                pip=run.plan.pip, cache=self._cache(), on_event=self.output.line,
            )  # fmt: skip
            verdict = self.range_gate(wheel, request)
        for check in verdict.checks:
            self.output.line(f"torch {check['version']}: {check['verdict']}: {check['summary']}")
        claim = verdict.claim
        if verdict.problem is not None:
            self.output.warn(
                f"torch range: the checks could not be made ({verdict.problem}); the wheel "
                f"keeps the pin {claim.requirement}"
            )
        if claim.unchecked:
            self.output.warn(
                f"torch range: {', '.join(claim.unchecked)} lie inside the range on the index "
                "and were not checked: shut out with !=; add them to [torch] loads_with to claim "
                "them"
            )
        self.output.line(f"Requires-Dist: {claim.requirement}")
        if claim.requirement == torch.pin_requirement:
            return wheel, verdict
        relabelled = relabel_wheel(wheel, run.staging / "range", None, claim.requirement)
        claimed = run.staging / "claimed" / wheel.name
        claimed.parent.mkdir(parents=True, exist_ok=True)
        repack_wheel(relabelled, claimed, run.plan.source.source_date_epoch)
        return claimed, verdict

    def _cache(self) -> Path:
        return self.cache if self.cache is not None else cache_dir(None)

    def _deliver(
        self, plan: BuildPlan, wheel: Path, document: Mapping[str, object], run: RunRecord
    ) -> Path:
        """Into the output folder, or to ``rejected/`` and a ``BuildError`` (the gates)."""
        verdict, comparison, load = run.verdict, run.comparison, run.load
        if comparison is not None and not comparison.identical:
            self._reject(plan, wheel, document, verdict, comparison)
            raise BuildError(
                f"--check-reproducible: {comparison.summary()}",
                hint=f"the first wheel and both reports are in {plan.out_dir / 'rejected'}",
            )
        if not verdict.ok:
            rejected = self._reject(plan, wheel, document, verdict, comparison)
            raise BuildError(
                f"the wheel failed the audit gate: {verdict.summary}",
                hint=f"moved to {rejected} with its audit report",
            )
        if load is not None and not load.ok:
            # Nothing reaches the output folder: the wheel cannot be used with its torch.
            raise BuildError(
                f"the wheel would not load next to the torch it was built against: {load.summary}",
                hint="link the extension against the pinned torch's own libraries (build "
                "isolation off, no second torch in the build environment); --keep-work keeps "
                "the built wheel for `archwheel can-load WHEEL --with TORCH.whl`",
            )
        return self._place(plan, wheel, plan.out_dir, document)

    # -- images -------------------------------------------------------------------------------
    def _base_image_id(self) -> str:
        found = self._find_base_image()
        check_base_image_pin(
            self.plan.base_image,
            found,
            self.plan.recipe.toolchain.base_image_id,
            self.plan.recipe.path,
        )
        return found

    def _find_base_image(self) -> str:
        reference = self.plan.base_image
        if is_local_base(reference):
            base = ensure_base_image(
                self.engine,
                suite=suite_of(reference),
                mirror=self.base_mirror,
                sink=self.output.line,
            )
            return base.image_id
        existing = self.engine.image_id(reference)
        if existing:
            return existing
        try:
            self.engine.pull(reference)
        except ToolError as exc:
            raise ToolError(
                f"base image {reference} is not present and could not be pulled ({exc.message})",
                hint=f"`{self.plan.engine} load` it, or use a recipe whose base_image is "
                "archwheel/debian:bookworm (made locally by `archwheel base-image`)",
            ) from None
        pulled = self.engine.image_id(reference)
        if pulled is None:
            raise ToolError(f"{self.plan.engine} pull {reference} did not produce the image")
        return pulled

    def _builder_image(self, base_id: str) -> BuilderImage:
        spec = BuilderImageSpec(
            base_image=self.plan.base_image,
            toolchain=self.plan.recipe.toolchain,
            python=self.plan.python,
            dockerfile_sha256=context_hash(self.docker_dir),
        )
        return ensure_builder_image(
            self.engine,
            spec,
            base_id,
            docker_dir=self.docker_dir,
            pip=self.plan.pip,
            work_dir=self.work_root,
            sink=self.output.line,
            platforms=lambda: manylinux_platforms(image_glibc(self.engine, self.plan.base_image)),
        )

    # -- placing the result -------------------------------------------------------------------
    def _place(
        self, plan: BuildPlan, staged: Path, folder: Path, document: Mapping[str, object]
    ) -> Path:
        """The wheel, its provenance and its smoke snippet, all or none (``place_together``:
        each written beside its name, then renamed, the wheel last). A full output folder
        leaves it as it was, old files included, with one line naming it."""
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / staged.name
        files: list[tuple[Path, Callable[[IO[bytes]], object]]] = [
            (final, lambda out: copy_into(staged, out)),
            (provenance_path(final), lambda out: out.write(json_bytes(document))),
        ]
        if plan.recipe.smoke_snippet is not None:
            snippet = (plan.recipe.smoke_snippet.strip() + "\n").encode()
            files.append((smoke_snippet_path(final), lambda out: out.write(snippet)))
        try:
            place_together(files)
        except OSError as exc:
            if exc.errno not in NO_ROOM_ERRNOS:
                raise
            free = shutil.disk_usage(folder).free
            raise BuildError(
                f"{folder}: cannot place {final.name} ({staged.stat().st_size / 2**20:.1f} MiB, "
                f"{free / 2**20:.1f} MiB free there): {exc.strerror}; nothing was placed",
                hint="free space in that folder or build into another --out; the build's "
                "compiler cache keeps what it compiled, so the next build is quick",
            ) from None
        return final

    def _reject(
        self,
        plan: BuildPlan,
        staged: Path,
        document: Mapping[str, object],
        verdict: GateVerdict,
        comparison: WheelComparison | None,
    ) -> Path:
        rejected = plan.out_dir / "rejected"
        final = self._place(plan, staged, rejected, document)
        report = swap_path(verdict.report, str(staged), str(final))  # the file kept, not the stage
        write_json_atomic(final.with_name(final.name + ".audit.json"), report)
        if comparison is not None and not comparison.identical:
            write_json_atomic(
                final.with_name(final.name + ".reproducibility.json"), comparison.to_json_dict()
            )
        return final


def smoke_snippet_path(wheel: Path) -> Path:
    """``<wheel>.smoke.py``: the recipe's smoke snippet, for ``archwheel smoke --snippet``."""
    return wheel.with_name(wheel.name + ".smoke.py")
