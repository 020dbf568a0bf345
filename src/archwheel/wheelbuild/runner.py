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
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import TextIO

from archwheel.effects.engine import Container, ContainerEngine, ContainerSpec, Mount
from archwheel.effects.files import (
    copy_file_atomic,
    open_regular,
    sha256_file,
    write_json_atomic,
    write_text_atomic,
)
from archwheel.effects.redis_relay import UnixRelay, probe
from archwheel.errors import BuildError, ToolError
from archwheel.facts.python_target import PythonTarget
from archwheel.wheelbuild.baseimage import (
    check_base_image_pin,
    ensure_base_image,
    is_local_base,
    suite_of,
)
from archwheel.wheelbuild.builder_image import (
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
from archwheel.wheelbuild.failures import out_of_memory_error, out_of_memory_evidence
from archwheel.wheelbuild.gate import (
    AuditGate,
    GateVerdict,
    LoadGate,
    LoadGateVerdict,
    audit_gate,
    load_gate,
)
from archwheel.wheelbuild.plan import (
    BUILD,
    BUILD_SRC,
    CCACHE,
    DIST,
    FILE_LIST,
    BuildPlan,
    without_remote_cache,
)
from archwheel.wheelbuild.provenance import ImageRecord, provenance_document, provenance_path
from archwheel.wheelbuild.remote_cache import (
    LAUNCHER_DIR,
    REMOTE_MOUNT,
    STATS_LOG,
    CacheCounts,
    CompileRecord,
    launcher_script,
    parse_stats_log,
)
from archwheel.wheelbuild.repair import repair_step, spec_for_recipe
from archwheel.wheelbuild.reproducible import WheelComparison, compare_wheels, repack_wheel
from archwheel.wheelbuild.toolkit import ensure_torch_image, image_glibc, manylinux_platforms
from archwheel.wheelbuild.wheel_label import relabel_wheel

_PROGRESS = re.compile(r"^\s*\[(\d+)/(\d+)\]")
_CCACHE_STAT = re.compile(r"^(\w+)\s+(\d+)$")


class BuildOutput:
    """Where build output goes: the log file always, the terminal unless quiet.

    Lines like ``[12/345]`` (ninja, and the example backend) move the progress display.
    """

    def __init__(
        self,
        log: TextIO | None,
        *,
        printer: Callable[[str], None] | None = None,
        on_progress: Callable[[str, int, int], None] | None = None,
        on_stage: Callable[[str, str], None] | None = None,
        warner: Callable[[str], None] | None = None,
    ) -> None:
        self.log = log
        self.printer = printer
        self.warner = warner
        self.on_progress = on_progress
        self.on_stage = on_stage
        self.stage_name = ""

    def _write(self, text: str) -> None:
        if self.log is not None:
            self.log.write(text + "\n")
            self.log.flush()

    def echo(self, text: str) -> None:
        """A command about to run (``+ docker ...``)."""
        self._write(text)
        if self.printer:
            self.printer(text)

    def line(self, text: str) -> None:
        """One line of build output."""
        self._write(text)
        if self.printer:
            self.printer(text)
        m = _PROGRESS.match(text)
        if m and self.on_progress:
            self.on_progress(self.stage_name, int(m.group(1)), int(m.group(2)))

    def warn(self, text: str) -> None:
        """Something the user must see even with --quiet (said once by the caller)."""
        self._write(f"warning: {text}")
        if self.warner:
            self.warner(text)
        elif self.printer:
            self.printer(f"warning: {text}")

    def stage(self, name: str, description: str) -> None:
        self.stage_name = name
        self._write(f"== {name}: {description}")
        if self.on_stage:
            self.on_stage(name, description)
        elif self.printer:
            self.printer(f"== {name}: {description}")


@dataclass(frozen=True)
class BuildResult:
    wheel: Path
    provenance: Path
    sha256: str
    verdict: GateVerdict
    timings: Mapping[str, float]
    comparison: WheelComparison | None = None
    cache_stats: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    smoke_snippet: Path | None = None  # <wheel>.smoke.py, the recipe's [smoke] snippet


@dataclass(frozen=True)
class _Built:
    wheel: Path  # the deterministic re-pack, in the staging folder
    timings: Mapping[str, float]
    cache_stats: Mapping[str, int]
    compiles: tuple[CompileRecord, ...] = ()


# The stats log is the build's own output; read at most this much of it.
_STATS_LOG_LIMIT = 64 * 1024 * 1024


def _built_wheels(dist: Path) -> list[Path]:
    """The wheels the build left in its dist folder: regular files only. The work folder is
    written by the build (a recipe's command, an sdist's setup.py) and read by archwheel on the
    host: a link there (to a host file, or a folder) is refused, not followed."""
    if dist.is_symlink():
        raise BuildError(f"the build made {DIST} a symbolic link; archwheel does not follow it")
    if not dist.is_dir():
        return []
    found: list[Path] = []
    with os.scandir(dist) as entries:
        for entry in entries:
            if not entry.name.endswith(".whl"):
                continue
            if not entry.is_file(follow_symlinks=False):
                raise BuildError(
                    f"the build left {entry.name} in {DIST} as a link or a special file, not "
                    "a wheel file; archwheel does not follow it"
                )
            found.append(Path(entry.path))
    return sorted(found)


def _read_compiles(work: Path) -> tuple[CompileRecord, ...]:
    """The per-file record of the compile step (ccache's stats log in the work folder)."""
    path = work / STATS_LOG.removeprefix(BUILD + "/")
    try:
        # The work folder is the build's: a link or a FIFO there is not followed or waited on.
        if path.is_symlink():
            return ()
        with open_regular(path) as log:
            text = log.read(_STATS_LOG_LIMIT).decode("utf-8", "replace")
    except OSError:
        return ()
    return parse_stats_log(text, base=BUILD_SRC)


class BuildRunner:
    def __init__(
        self,
        plan: BuildPlan,
        engine: ContainerEngine,
        output: BuildOutput,
        *,
        docker_dir: Path,
        work_root: Path | None = None,
        gate: AuditGate = audit_gate,
        load_gate: LoadGate = load_gate,
        keep_work: bool = False,
    ) -> None:
        self.plan = plan
        self.engine = engine
        self.output = output
        self.docker_dir = docker_dir
        self.work_root = work_root
        self.gate = gate
        self.load_gate = load_gate
        self.keep_work = keep_work

    # -- the whole build ----------------------------------------------------------------------
    def run(self) -> BuildResult:
        plan = self.plan
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        clock = time.monotonic()
        timings: dict[str, float] = {}
        # [repair] resolved first: a missing pin table is refused before any container.
        repair_spec = spec_for_recipe(plan.recipe)

        self.output.stage("engine", f"check {plan.engine}")
        version = self.engine.version()

        self.output.stage("base-image", plan.base_image)
        mark = time.monotonic()
        base_id = self._base_image_id()
        timings["base_image"] = time.monotonic() - mark

        toolchain_spec = plan.recipe.toolchain
        if toolchain_spec.source == "image":
            # Refuse a base image whose toolkit is not the recipe's before building anything
            # on it (provisioning a builder image can take minutes).
            self.output.stage("base-toolkit", f"find CUDA {plan.recipe.cuda} in the base image")
            found = probe_base_toolkit(
                self.engine, plan.base_image, plan.recipe.cuda, self.docker_dir
            )
            self.output.line(
                f"{plan.base_image}: {found.cuda_home or 'no toolkit'}"
                + (f", nvcc {found.nvcc}" if found.nvcc else "")
            )
            check_base_toolkit(found, plan.recipe.cuda, plan.recipe.path, plan.base_image)

        self.output.stage("builder-image", "docker/Dockerfile on the base image")
        mark = time.monotonic()
        builder = self._builder_image(base_id)
        timings["builder_image"] = time.monotonic() - mark

        self.output.stage("toolchain", "probe the toolkit inside the builder image")
        toolchain = probe_toolchain(self.engine, builder.tag)
        origin = (
            f"base image {plan.base_image} (builder {builder.tag})"
            if toolchain_spec.source == "image"
            else f"the PyPI toolchain of {builder.tag}"
        )
        check_toolchain(toolchain, plan.recipe.cuda, plan.recipe.path, origin)
        self.output.line(
            f"nvcc {toolchain.nvcc}, gcc {toolchain.gcc}, python {toolchain.python}, "
            f"ccache {toolchain.ccache}, glibc {toolchain.glibc}"
        )
        if not toolchain.python.startswith(PythonTarget.parse(plan.python).version + "."):
            raise BuildError(
                f"the builder image has Python {toolchain.python}, the plan asks for {plan.python}"
            )
        torch_record: dict[str, object] | None = None
        if plan.torch is not None:
            # The pinned torch and its CUDA toolkit, installed once into an image of their own.
            self.output.stage(
                "torch-image", f"torch {plan.torch.wheel.version} and its toolkit (made once)"
            )
            mark = time.monotonic()
            torch_image = ensure_torch_image(
                self.engine,
                plan.torch,
                builder_tag=builder.tag,
                builder_image_id=builder.image_id,
                python=plan.python,
                toolchain=toolchain_spec,
                pip=plan.pip,
                sink=self.output.line,
            )
            timings["torch_image"] = time.monotonic() - mark
            toolchain = probe_toolchain(self.engine, torch_image.tag)
            check_toolchain(
                toolchain, plan.recipe.cuda, plan.recipe.path, f"torch image {torch_image.tag}"
            )
            self.output.line(
                f"torch image {torch_image.tag}: nvcc {toolchain.nvcc} in {toolchain.cuda_home}"
            )
            torch_record = {
                **plan.torch.to_json_dict(),
                "image": torch_image.tag,
                "image_id": torch_image.image_id,
                "image_created": torch_image.created,
            }
            builder = BuilderImage(
                torch_image.tag,
                torch_image.image_id,
                builder.base_image,
                builder.base_image_id,
                created=torch_image.created,
            )

        plan.out_dir.mkdir(parents=True, exist_ok=True)
        remote_record = self._check_remote_cache()
        plan = self.plan  # without the remote cache when its server is unreachable
        staging = Path(tempfile.mkdtemp(prefix="archwheel-stage-", dir=self.work_root))
        remote = plan.remote_cache
        relay = UnixRelay(remote.address, parent=self.work_root) if remote else None
        try:
            with contextlib.ExitStack() as stack:
                if relay is not None:
                    stack.enter_context(relay)
                first = self._build_once(builder, staging / "first", toolchain, relay)
            counts = CacheCounts.from_stats(first.cache_stats)
            if (
                remote is not None
                and relay is not None
                and (counts.remote_errors or relay.failures)
            ):
                self.output.warn(
                    f"compiler cache: {counts.remote_errors} remote-cache errors during the build "
                    f"({relay.failures} connections to {remote.redacted()} failed: server down?); "
                    "those compiles went on without it"
                )
            if remote_record is not None:
                remote_record["errors"] = counts.remote_errors
                if relay is not None:
                    remote_record["relay_connections"] = relay.connections
                    remote_record["relay_failures"] = relay.failures
            timings.update(first.timings)

            def repaired(built: Path, where: Path) -> tuple[Path, dict[str, object] | None]:
                if repair_spec is None:
                    return built, None
                where.mkdir(parents=True)
                mark = time.monotonic()
                result = repair_step(
                    built, repair_spec, self.engine, builder.tag, where,
                    user=plan.user, source_date_epoch=plan.source.source_date_epoch,
                    output=self.output,
                )  # fmt: skip
                timings["repair"] = time.monotonic() - mark
                return result

            wheel, repair = repaired(first.wheel, staging / "repair-first")
            comparison: WheelComparison | None = None
            if plan.check_reproducible:
                # The delivered wheel is the repaired one: both builds are repaired, and the
                # repaired wheels are compared (the repair must be reproducible too).
                second = self._build_once(builder, staging / "second", toolchain)
                second_wheel, _ = repaired(second.wheel, staging / "repair-second")
                comparison = compare_wheels(wheel, second_wheel)
                self.output.line(f"reproducibility: {comparison.summary()}")

            self.output.stage("audit", f"audit the wheel against {plan.arch_list}")
            mark = time.monotonic()
            verdict = self.gate(wheel, plan.arch_list)
            timings["audit"] = time.monotonic() - mark
            self.output.line(f"audit: {'passed' if verdict.ok else 'FAILED'}: {verdict.summary}")
            load: LoadGateVerdict | None = None
            if plan.torch is not None and verdict.ok:
                # Does it load next to the torch it was compiled against? (can-load)
                self.output.stage("can-load", f"can-load against {plan.torch.wheel.filename}")
                mark = time.monotonic()
                load = self.load_gate(wheel, plan.torch.wheel.path)
                timings["can_load"] = time.monotonic() - mark
                self.output.line(f"can-load: {load.verdict}: {load.summary}")
            timings["total"] = time.monotonic() - clock

            digest = sha256_file(wheel)
            document = provenance_document(
                wheel_name=wheel.name,
                wheel_sha256=digest,
                wheel_size=wheel.stat().st_size,
                recipe={
                    "name": plan.recipe.name,
                    "path": str(plan.recipe.path),
                    "sha256": plan.recipe.sha256,
                    "kind": plan.recipe.kind,
                    "version": plan.recipe.version,
                },
                source=plan.source.to_json_dict(),
                images=ImageRecord(
                    plan.base_image,
                    base_id,
                    builder.tag,
                    builder.image_id,
                    tuple(self.engine.repo_digests(plan.base_image)),
                    plan.recipe.toolchain.base_image_id,
                ),
                toolchain=toolchain.to_json_dict(),
                arch={
                    "requested": str(plan.arch_list),
                    "variable": plan.recipe.arch.variable,
                    "format": plan.recipe.arch.format,
                    "consumer": plan.recipe.arch.consumer,
                    "torch_grammar": plan.recipe.arch.torch,
                    "value": plan.arch_value,
                },
                python=plan.python,
                environment=dict(plan.build_env),
                command=plan.recipe.build.command.strip(),
                source_date_epoch=plan.source.source_date_epoch,
                engine={"name": plan.engine, "version": version},
                jobs={
                    "jobs": plan.jobs.jobs,
                    "by_cpu": plan.jobs.by_cpu,
                    "by_memory": plan.jobs.by_memory,
                    "requested": plan.jobs.requested,
                    "variable": plan.recipe.build.jobs_variable,
                },
                network_during_compile=plan.network_during_compile,
                timings=timings,
                compiler_cache={
                    "volume": plan.ccache_volume,
                    "ccache": toolchain.ccache,
                    **first.cache_stats,
                    "local_hits": counts.local_hits,
                    "remote_hits": counts.remote_hits,
                    "misses": counts.misses,
                    "hit_rates": counts.rates(),
                    "remote": remote_record,
                    # each compile's input file and where its object came from (ccache's
                    # stats log): which objects a cache supplied, and from which machine
                    "compiles": [c.to_json_dict() for c in first.compiles],
                    "key": "ccache's own key + namespace of the toolkit identity and the "
                    "environment-carried compiler flags (build/remote_cache.py)"
                    if plan.ccache_volume
                    else None,
                },
                audit={"ok": verdict.ok, "summary": verdict.summary},
                reproducibility=comparison.to_json_dict() if comparison else None,
                smoke_snippet=plan.recipe.smoke_snippet,
                started_at=started,
                torch=torch_record,
                load=load.to_json_dict() if load is not None else None,
            )
            document["repair"] = repair
            if comparison is not None and not comparison.identical:
                self._reject(wheel, document, verdict, comparison)
                raise BuildError(
                    f"--check-reproducible: {comparison.summary()}",
                    hint=f"the first wheel and both reports are in {plan.out_dir / 'rejected'}",
                )
            if not verdict.ok:
                rejected = self._reject(wheel, document, verdict, comparison)
                raise BuildError(
                    f"the wheel failed the audit gate: {verdict.summary}",
                    hint=f"moved to {rejected} with its audit report",
                )
            if load is not None and not load.ok:
                # Nothing reaches the output folder: the wheel cannot be used with its torch.
                raise BuildError(
                    f"the wheel would not load next to the torch it was built against: "
                    f"{load.summary}",
                    hint="link the extension against the pinned torch's own libraries (build "
                    "isolation off, no second torch in the build environment); --keep-work keeps "
                    "the built wheel for `archwheel can-load WHEEL --with TORCH.whl`",
                )
            final = self._place(wheel, plan.out_dir, document)
            return BuildResult(
                smoke_snippet=smoke_snippet_path(final) if plan.recipe.smoke_snippet else None,
                wheel=final,
                provenance=provenance_path(final),
                sha256=digest,
                verdict=verdict,
                timings=MappingProxyType(timings),
                comparison=comparison,
                cache_stats=MappingProxyType(
                    {
                        **first.cache_stats,
                        "local_hits": counts.local_hits,
                        "remote_hits": counts.remote_hits,
                        "misses": counts.misses,
                    }
                ),
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    # -- the remote compiler cache ------------------------------------------------------------
    def _check_remote_cache(self) -> dict[str, object] | None:
        """Probe the remote cache's server; unreachable: say so once, build without it."""
        url = self.plan.remote_cache
        if url is None:
            return None
        problem = probe(url.address)
        if problem is None:
            self.output.line(f"compiler cache: remote {url.redacted()} answers")
            return {"url": url.redacted(), "used": True, "via": f"relay socket at {REMOTE_MOUNT}"}
        self.output.warn(
            f"compiler cache: the remote cache {url.redacted()} is unreachable ({problem}); "
            "this build goes on without it (local cache only)"
        )
        self.plan = without_remote_cache(self.plan)
        return {"url": url.redacted(), "used": False, "unreachable": problem}

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
            base = ensure_base_image(self.engine, suite=suite_of(reference), sink=self.output.line)
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

    # -- one build ----------------------------------------------------------------------------
    def _build_once(
        self,
        builder: BuilderImage,
        staging: Path,
        toolchain: Toolchain,
        relay: UnixRelay | None = None,
    ) -> _Built:
        plan = self.plan
        timings: dict[str, float] = {}
        stats: dict[str, int] = {}
        work = Path(tempfile.mkdtemp(prefix="archwheel-work-", dir=self.work_root))
        try:
            (work / FILE_LIST.removeprefix(BUILD + "/")).write_bytes(
                b"".join(name.encode() + b"\0" for name in plan.source.files)
            )
            if plan.ccache_volume is not None:
                launcher = work / LAUNCHER_DIR.removeprefix(BUILD + "/") / "ccache"
                launcher.parent.mkdir(parents=True)
                launcher.write_text(launcher_script())
                launcher.chmod(0o755)
            _give(work, plan.build_user)
            use_stats = plan.ccache_volume is not None and toolchain.ccache != "none"
            before: dict[str, int] = {}
            for phase in plan.phases:
                mark = time.monotonic()
                spec = ContainerSpec(
                    image=builder.tag,
                    network=phase.network,
                    user=plan.user,
                    workdir=BUILD,
                    mounts=(
                        *phase.mounts,
                        Mount(str(work), BUILD),
                        *(
                            (Mount(str(relay.folder), REMOTE_MOUNT),)
                            if relay is not None and phase.name == "compile"
                            else ()
                        ),
                    ),
                    labels={"org.archwheel.recipe": plan.recipe.name},
                )
                with self.engine.container(spec) as container:
                    for step in phase.steps:
                        if step.name == "compile" and use_stats:
                            before = _ccache_stats(container, plan.user)
                        self.output.stage(step.name, step.description)
                        tail: deque[str] = deque(maxlen=400)

                        def sink(line: str, tail: deque[str] = tail) -> None:
                            tail.append(line)
                            self.output.line(line)

                        try:
                            container.call(
                                step.command,
                                env=step.env,
                                workdir=step.workdir,
                                user=step.user,
                                sink=sink,
                                what=f"step {step.name!r}",
                            )
                        except BuildError as exc:
                            evidence = out_of_memory_evidence(tail, exc.message)
                            if step.name != "compile" or evidence is None:
                                raise
                            raise out_of_memory_error(
                                evidence,
                                jobs=plan.jobs.jobs,
                                jobs_variable=plan.recipe.build.jobs_variable,
                                memory_per_job_gib=plan.recipe.build.memory_per_job_gib,
                                recipe=plan.recipe.path,
                            ) from None
                        if step.name == "compile" and use_stats:
                            after = _ccache_stats(container, plan.user)
                            stats = {k: after.get(k, 0) - before.get(k, 0) for k in after}
                timings[phase.name] = time.monotonic() - mark

            self.output.stage("package", "re-pack the wheel deterministically")
            mark = time.monotonic()
            built = _built_wheels(work / DIST.removeprefix(BUILD + "/"))
            if len(built) != 1:
                found = ", ".join(p.name for p in built) or "none"
                raise BuildError(
                    f"the build command must leave exactly one wheel in {DIST}; found {found}",
                    hint=f"check [build] command in {plan.recipe.path}",
                )
            fits, why = PythonTarget.parse(self.plan.python).accepts(built[0].name)
            if not fits:
                raise BuildError(
                    f"the build made a wheel for another Python: {why}",
                    hint=f"check that {self.plan.recipe.path} [build] runs $ARCHWHEEL_PYTHON",
                )
            staging.mkdir(parents=True)
            wheel = built[0]
            if plan.torch is not None:
                # What it was built against: +pt2.14.1cu130 and Requires-Dist torch==2.14.1.
                # Written to staging, never into the work folder (the build's, links and all).
                wheel = relabel_wheel(
                    wheel,
                    staging / "relabelled",
                    plan.torch.local_version,
                    plan.torch.pin_requirement,
                )
            staged = staging / wheel.name
            repack_wheel(wheel, staged, plan.source.source_date_epoch)
            timings["package"] = time.monotonic() - mark
            self.output.line(f"wheel: {staged.name} sha256 {sha256_file(staged)}")
            return _Built(
                staged, MappingProxyType(timings), MappingProxyType(stats), _read_compiles(work)
            )
        finally:
            if self.keep_work:
                self.output.line(f"keeping the work folder {work} (--keep-work)")
            else:
                shutil.rmtree(work, ignore_errors=True)

    # -- placing the result -------------------------------------------------------------------
    def _place(self, staged: Path, folder: Path, document: Mapping[str, object]) -> Path:
        """Provenance first, then the wheel: copied under a hidden name and renamed (atomic)."""
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / staged.name
        write_json_atomic(provenance_path(final), document)
        if self.plan.recipe.smoke_snippet is not None:
            snippet = self.plan.recipe.smoke_snippet.strip() + "\n"
            write_text_atomic(smoke_snippet_path(final), snippet)
        copy_file_atomic(staged, final)
        return final

    def _reject(
        self,
        staged: Path,
        document: Mapping[str, object],
        verdict: GateVerdict,
        comparison: WheelComparison | None,
    ) -> Path:
        rejected = self.plan.out_dir / "rejected"
        final = self._place(staged, rejected, document)
        write_json_atomic(final.with_name(final.name + ".audit.json"), dict(verdict.report))
        if comparison is not None and not comparison.identical:
            write_json_atomic(
                final.with_name(final.name + ".reproducibility.json"), comparison.to_json_dict()
            )
        return final


def smoke_snippet_path(wheel: Path) -> Path:
    """``<wheel>.smoke.py``: the recipe's smoke snippet, for ``archwheel smoke --snippet``."""
    return wheel.with_name(wheel.name + ".smoke.py")


def _give(folder: Path, user: tuple[int, int]) -> None:
    """Make the work folder the build user's (needed when archwheel runs as root)."""
    if os.getuid() != 0:
        return
    for dirpath, dirnames, filenames in os.walk(folder):
        os.chown(dirpath, *user)
        for name in (*dirnames, *filenames):
            os.chown(Path(dirpath) / name, *user, follow_symlinks=False)


def _ccache_stats(container: Container, user: str) -> dict[str, int]:
    """ccache's counters (``ccache --print-stats``) in the build container."""
    try:
        text = container.output(
            ["env", f"CCACHE_DIR={CCACHE}", "ccache", "--print-stats"], user=user
        )
    except BuildError:
        return {}
    stats: dict[str, int] = {}
    for line in text.splitlines():
        m = _CCACHE_STAT.match(line.strip())
        if m and m.group(1) in (
            "direct_cache_hit",
            "preprocessed_cache_hit",
            "cache_miss",
            "files_in_cache",
            "local_storage_hit",
            "remote_storage_hit",
            "remote_storage_miss",
            "remote_storage_error",
            "remote_storage_timeout",
            "remote_storage_write",
        ):
            stats[m.group(1)] = int(m.group(2))
    return stats
