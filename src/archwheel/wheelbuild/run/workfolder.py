"""One build in containers: a fresh work folder, each plan phase in its own container, and the
single wheel it leaves re-packed deterministically into the staging folder.

The work folder is written by the build (a recipe's command, an sdist's setup.py, inside the
container) and read here on the host, often as root: nothing there is followed out of it or
waited on (``built_wheels``, ``read_compiles``), and nothing is written into it once a container
has run in it (the relabelled wheel goes to the staging folder, which no container sees).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from archwheel.binary.buildfile import BuildSteps
from archwheel.binary.scan.inputs import scan_path
from archwheel.effects.engine import Container, ContainerEngine, ContainerSpec, Mount
from archwheel.effects.files import open_regular, sha256_file
from archwheel.effects.owner import owned_tempdir, remove_owned, unmark_folder
from archwheel.effects.redis_relay import UnixRelay
from archwheel.errors import BuildError
from archwheel.facts.arch import CodeKind
from archwheel.facts.python_target import PythonTarget
from archwheel.inspection.build_files import read_build_trees
from archwheel.verdicts.compile_failure import EvidenceLines, kept_line
from archwheel.wheelbuild.compile import whole_call
from archwheel.wheelbuild.compile.dist_farm import FARM_MOUNT
from archwheel.wheelbuild.compile.nvcc_record import (
    MAX_RECORD_BYTES,
    NVCC_RECORD,
    RECORD_HEADER,
    TIME_FLAG,
    NvccRecord,
    read_nvcc_record,
    read_record_file,
)
from archwheel.wheelbuild.compile.parallel import PARALLEL_CONFIG, SPREAD_DIR, write_spread_hook
from archwheel.wheelbuild.compile.remote_cache import (
    FALLBACK_LOG,
    FORWARDER,
    LAUNCHER_DIR,
    REMOTE_MOUNT,
    SCCACHE_BIN,
    SERVER_LOG,
    SERVER_SOCKET,
    WHOLE_CALL_LOG,
    WHOLE_CALL_SCRIPT,
)
from archwheel.wheelbuild.compile.sccache_launcher import FORWARDER_SCRIPT, launcher_script
from archwheel.wheelbuild.compile.sccache_stats import (
    CompileRecord,
    parse_server_log,
    parse_stats_json,
)
from archwheel.wheelbuild.images.builder_image import BuilderImage, Toolchain
from archwheel.wheelbuild.planning.plan import (
    BUILD,
    BUILD_SRC,
    CACHE_DIR,
    DIST,
    FILE_LIST,
    BuildPlan,
    Step,
)
from archwheel.wheelbuild.run.compile_watch import CompileWatch, cuda_total, record_path
from archwheel.wheelbuild.run.failures import (
    compile_failure_error,
    out_of_space_error,
    out_of_space_evidence,
)
from archwheel.wheelbuild.run.farm_build import write_container_config
from archwheel.wheelbuild.run.kept_tree import NVCC_HISTORY
from archwheel.wheelbuild.run.output import BuildOutput
from archwheel.wheelbuild.run.stages import Timings
from archwheel.wheelbuild.wheel.preview import LIBRARY_FOLDER, tree_libraries
from archwheel.wheelbuild.wheel.reproducible import repack_wheel
from archwheel.wheelbuild.wheel.wheel_label import relabel_wheel

# The daemon's log is written in the build's work folder; read at most this much of it.
_SERVER_LOG_LIMIT = 256 * 1024 * 1024


@dataclass(frozen=True)
class Built:
    """What one build in containers made."""

    wheel: Path  # the deterministic re-pack, in the staging folder
    timings: Mapping[str, float]  # its phases and the package step
    cache_stats: Mapping[str, object]  # sccache's statistics after the compile step (JSON)
    compiles: tuple[CompileRecord, ...] = ()
    cache_room: CacheRoom | None = None  # the cache volume's file system after the compile
    nvcc: NvccRecord | None = None  # what nvcc compiled (its --time record; nvcc_record.py)
    fallbacks: tuple[str, ...] = ()  # why compiles ran without the cache (the launcher's log)
    build_steps: tuple[tuple[str, BuildSteps], ...] = ()  # build.ninja files under the source
    # the whole-call cache's log (whole_call.py): "hit OBJ" / "store OBJ", one line a call
    whole_calls: tuple[str, ...] = ()


# The steps that compile: a failure's output is read for its cause (failures.py).
COMPILING_STEPS = frozenset({"compile", "targets"})


@dataclass(frozen=True)
class Configured:
    """What a build stopped after its configure step left: the build files it wrote, read."""

    build_steps: tuple[tuple[str, BuildSteps], ...]  # build.ninja files under the source
    timings: Mapping[str, float]
    kept: Path | None  # the work folder, where --keep-work kept it
    # a partial build (--targets): each CUDA step's object that exists, by (build file,
    # output) -> the SASS and PTX images it holds, read by the audit's scanner
    objects: Mapping[tuple[str, str], tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # a partial build's shared libraries ([build] build_folder/lib), copied out of the tree
    libraries: tuple[Path, ...] = ()


@dataclass(frozen=True)
class WorkFolder:
    """Where and how a build runs its containers: the engine, the output, the work root."""

    engine: ContainerEngine
    output: BuildOutput
    work_root: Path | None = None
    keep_work: bool = False
    tree: Path | None = None  # a kept build tree (kept_tree.py), mounted at /build/src

    def source_tree(self, work: Path) -> Path:
        """Where the build's copy of the source is on the host."""
        return self.tree if self.tree is not None else work / "src"

    def build_once(
        self,
        plan: BuildPlan,
        builder: BuilderImage,
        staging: Path,
        toolchain: Toolchain,
        relay: UnixRelay | None = None,
        *,
        farm_folder: Path | None = None,
    ) -> Built:
        """Run the plan's phases in a fresh work folder; the wheel lands in ``staging``. The
        relay's folder and the farm route's (``farm_folder``) are mounted into the compile
        phase only."""
        timings = Timings()
        with self._folder(plan) as work:
            try:
                stats, room = self._run_phases(
                    plan, builder, work, toolchain, relay=relay, farm=farm_folder, timings=timings
                )
            finally:
                self._remember_record(work)
            with timings.stage(self.output, "package", "re-pack the wheel deterministically"):
                staged = _package(plan, work, staging)
            self.output.line(f"wheel: {staged.name} sha256 {sha256_file(staged)}")
            return Built(
                staged,
                timings.frozen(),
                MappingProxyType(stats),
                read_compiles(work),
                room,
                self._nvcc_record(work),
                read_fallbacks(work),
                read_build_trees(self.source_tree(work)),
                read_whole_calls(work),
            )

    def configure_once(
        self,
        plan: BuildPlan,
        builder: BuilderImage,
        toolchain: Toolchain,
        libraries_into: Path | None = None,
    ) -> Configured:
        """Run a plan that stops after its configure step (``--stop-after configure``) in a
        fresh work folder and read the build files it wrote; a partial build's shared libraries
        are copied into ``libraries_into`` (the repair step's preview)."""
        timings = Timings()
        with self._folder(plan) as work:
            try:
                self._run_phases(plan, builder, work, toolchain, relay=None, timings=timings)
            finally:
                self._remember_record(work)
            kept = self.tree if self.tree is not None else work if self.keep_work else None
            tree = self.source_tree(work)
            found = read_build_trees(tree)
            objects = built_objects(tree, found) if plan.targets else {}
            folder = tree / plan.recipe.build.build_folder / LIBRARY_FOLDER
            libraries = (
                tree_libraries(folder, libraries_into)
                if plan.targets and libraries_into is not None
                else ()
            )
            return Configured(found, timings.frozen(), kept, MappingProxyType(objects), libraries)

    def _remember_record(self, work: Path) -> None:
        """In a kept build tree, this run's nvcc record joins the tree's history (beside the
        tree, where no container writes): a resumed build's gate sees every source compiled
        since the tree was made, not only this run's."""
        if self.tree is None:
            return
        run = record_path(work)
        try:
            if run.is_symlink():
                return
            with open_regular(run) as handle:
                data = handle.read(MAX_RECORD_BYTES)
        except OSError:
            return
        history = self.tree.parent / NVCC_HISTORY
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(history, flags, 0o600)
        with os.fdopen(fd, "ab") as out:
            out.write(data if data.endswith(b"\n") or not data else data + b"\n")

    def _nvcc_record(self, work: Path) -> NvccRecord | None:
        """What nvcc compiled: this run's, or in a kept tree every run's since it was made."""
        if self.tree is None:
            return read_nvcc_record(work)
        return read_record_file(self.tree.parent / NVCC_HISTORY)

    @contextlib.contextmanager
    def _folder(self, plan: BuildPlan) -> Iterator[Path]:
        """A fresh work folder for one build, prepared; removed after it unless kept."""
        work = owned_tempdir("archwheel-work-", self.work_root)
        try:
            _prepare(work, plan)
            yield work
        finally:
            if self.keep_work:
                unmark_folder(work)  # kept: not a leftover for the next run to remove
                self.output.line(f"keeping the work folder {work} (--keep-work)")
            else:
                remove_owned(work)

    def _run_phases(
        self,
        plan: BuildPlan,
        builder: BuilderImage,
        work: Path,
        toolchain: Toolchain,
        *,
        relay: UnixRelay | None,
        farm: Path | None = None,
        timings: Timings,
    ) -> tuple[dict[str, object], CacheRoom | None]:
        """Each phase in its own container; sccache's statistics after the compile step (its
        daemon started with the phase, so they are the compile's), and the room left on the
        cache volume's file system after it."""
        # the farm's job counts are sccache's statistics too, with or without the cache
        use_stats = (
            plan.ccache_volume is not None or plan.farm is not None
        ) and toolchain.sccache != "none"
        stats: dict[str, object] = {}
        room: CacheRoom | None = None
        for phase in plan.phases:
            with timings.timed(phase.name):
                relayed = (
                    (Mount(str(relay.folder), REMOTE_MOUNT),)
                    if relay is not None and phase.name == "compile"
                    else ()
                ) + (
                    (Mount(str(farm), FARM_MOUNT),)
                    if farm is not None and phase.name == "compile"
                    else ()
                )
                spec = ContainerSpec(
                    image=builder.tag,
                    network=phase.network,
                    user=plan.user,
                    workdir=BUILD,
                    mounts=(
                        *phase.mounts,
                        Mount(str(work), BUILD),
                        *((Mount(str(self.tree), BUILD_SRC),) if self.tree is not None else ()),
                        *relayed,
                    ),
                    labels={"org.archwheel.recipe": plan.recipe.name},
                )
                with self.engine.container(spec) as container:
                    for step in phase.steps:
                        self.output.stage(step.name, step.description)
                        with self._watch(plan, step, work):
                            self._call(container, plan, step, work)
                        if step.name == "compile" and use_stats:
                            stats = sccache_stats(container, plan.user)
                            room = cache_room(container, plan.user)
        return stats, room

    def _watch(
        self, plan: BuildPlan, step: Step, work: Path
    ) -> contextlib.AbstractContextManager[object]:
        """The compile step of a build that records its nvcc compiles and has CUDA sources is
        watched (``compile_watch.py``: its progress shown while it runs)."""
        total = cuda_total(plan) if step.name == "compile" else 0
        if total == 0 or TIME_FLAG not in step.env.get("NVCC_APPEND_FLAGS", ""):
            return contextlib.nullcontext()
        return CompileWatch(record_path(work), total, self.output.compile_progress)

    def _call(self, container: Container, plan: BuildPlan, step: Step, work: Path) -> None:
        """One step; a failed compile (the wheel's, or a partial build's ``targets``) says why
        where its output shows a known cause (failures.compile_failure_error: memory, disk,
        the C++ standard, ...)."""
        tail: deque[str] = deque(maxlen=400)
        evidence = EvidenceLines()

        def sink(line: str) -> None:
            self.output.line(line)  # the full log keeps the whole line
            evidence.add(line)
            tail.append(kept_line(line))  # each line of the tail at most MAX_KEPT_LINE

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
            if step.name in COMPILING_STEPS:
                raise compile_failure_error(
                    exc,
                    tail=tail,
                    evidence=evidence.lines(),
                    plan=plan,
                    work=work,
                    log=self.output.log_path,
                ) from None
            no_room = out_of_space_evidence(tail)
            if no_room is not None:
                raise out_of_space_error(no_room, work=work) from None
            raise


def built_objects(
    tree: Path, build_steps: tuple[tuple[str, BuildSteps], ...]
) -> dict[tuple[str, str], tuple[str, ...]]:
    """The objects of CUDA steps a partial build left in the tree, each scanned as the audit
    scans a wheel's libraries: its SASS and PTX images. An output that leads out of the tree
    or is a link is passed over (the build wrote the build file)."""
    root = tree.resolve()
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    for name, steps in build_steps:
        folder = tree / Path(name).parent
        for step in steps.cuda:
            path = folder / step.output
            if path.is_symlink() or not path.is_file():
                continue
            if not path.resolve().is_relative_to(root):
                continue
            inventory = scan_path(path)
            found[(name, step.output)] = tuple(
                sorted(
                    {
                        target.name(kind)
                        for library in inventory.libraries
                        for kind in (CodeKind.SASS, CodeKind.PTX)
                        for target in library.targets(kind)
                    }
                )
            )
    return found


def _prepare(work: Path, plan: BuildPlan) -> None:
    """The file list, archwheel's sccache launcher (also named ccache) and forwarder,
    setuptools' parallel config, and the folder given to the build user."""
    (work / FILE_LIST.removeprefix(BUILD + "/")).write_bytes(
        b"".join(name.encode() + b"\0" for name in plan.source.files)
    )
    # archwheel's own folder in the work folder, with or without the compiler cache: nvcc's
    # --time record goes there, and nvcc stops ("Cannot open file") where it cannot write it.
    record = work / NVCC_RECORD.removeprefix(BUILD + "/")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(RECORD_HEADER)  # every nvcc then appends (nvcc_record.RECORD_HEADER)
    # The launcher, with or without the cache: sccache runs every compiler (plan.py).
    launcher = work / LAUNCHER_DIR.removeprefix(BUILD + "/") / "sccache"
    launcher.parent.mkdir(parents=True, exist_ok=True)
    launcher.write_text(launcher_script())
    launcher.chmod(0o755)
    # torch's _wrap_compiler takes ccache before sccache: both names are the launcher
    (launcher.parent / "ccache").symlink_to("sccache")
    (work / FORWARDER.removeprefix(BUILD + "/")).write_text(FORWARDER_SCRIPT)
    # the whole-call cache's script, run by the launcher with the build's Python
    (work / WHOLE_CALL_SCRIPT.removeprefix(BUILD + "/")).write_text(
        Path(whole_call.__file__).read_text()
    )
    if plan.parallel is not None and plan.parallel.config:
        # setuptools' extra config file (DIST_EXTRA_CONFIG): [build_ext] parallel = N
        config = work / PARALLEL_CONFIG.removeprefix(BUILD + "/")
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(plan.parallel.config)
    if plan.parallel is not None and plan.parallel.spread:
        # the setuptools hook that builds each extension module in its own folder (PYTHONPATH)
        write_spread_hook(work / SPREAD_DIR.removeprefix(BUILD + "/"))
    # With a farm: the sccache client configuration, a placeholder token (farm_build.py)
    write_container_config(plan, work)
    chown_to_build_user(work, plan.build_user)


def _package(plan: BuildPlan, work: Path, staging: Path) -> Path:
    """The one wheel of the build, for the plan's Python, relabelled and re-packed."""
    built = built_wheels(work / DIST.removeprefix(BUILD + "/"))
    if len(built) != 1:
        found = ", ".join(p.name for p in built) or "none"
        raise BuildError(
            f"the build command must leave exactly one wheel in {DIST}; found {found}",
            hint=f"check [build] command in {plan.recipe.path}",
        )
    fits, why = PythonTarget.parse(plan.python).accepts(built[0].name)
    if not fits:
        raise BuildError(
            f"the build made a wheel for another Python: {why}",
            hint=f"check that {plan.recipe.path} [build] runs $ARCHWHEEL_PYTHON",
        )
    staging.mkdir(parents=True)
    wheel = built[0]
    if plan.torch is not None:
        # What it was built against: +pt2.14.1cu130 and Requires-Dist torch==2.14.1.
        # Written to staging, never into the work folder (the build's, links and all).
        wheel = relabel_wheel(
            wheel, staging / "relabelled", plan.torch.local_version, plan.torch.pin_requirement
        )
    staged = staging / wheel.name
    repack_wheel(wheel, staged, plan.source.source_date_epoch)
    return staged


def built_wheels(dist: Path) -> list[Path]:
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


def _read_own(work: Path, path: str, limit: int) -> str:
    """A file of archwheel's in the work folder, as text; "" when it is not a regular file.
    The work folder is the build's: a link or a FIFO there is not followed or waited on."""
    target = work / path.removeprefix(BUILD + "/")
    try:
        if target.is_symlink():
            return ""
        with open_regular(target) as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def read_compiles(work: Path) -> tuple[CompileRecord, ...]:
    """The per-step record of the compile step (the sccache daemon's log)."""
    return parse_server_log(_read_own(work, SERVER_LOG, _SERVER_LOG_LIMIT))


def read_fallbacks(work: Path) -> tuple[str, ...]:
    """Why compiles ran without the cache: the launcher's lines (at most 1000 kept)."""
    lines = _read_own(work, FALLBACK_LOG, 1 << 20).splitlines()
    return tuple(line[:300] for line in lines[:1000] if line.strip())


def read_whole_calls(work: Path) -> tuple[str, ...]:
    """The whole-call cache's lines ("hit OBJ", "store OBJ"; at most 100000 kept)."""
    lines = _read_own(work, WHOLE_CALL_LOG, 16 << 20).splitlines()
    return tuple(line[:1000] for line in lines[:100_000] if line.strip())


def chown_to_build_user(folder: Path, user: tuple[int, int]) -> None:
    """Make the work folder the build user's (needed when archwheel runs as root)."""
    if os.getuid() != 0:
        return
    for dirpath, dirnames, filenames in os.walk(folder):
        os.chown(dirpath, *user)
        for name in (*dirnames, *filenames):
            os.chown(Path(dirpath) / name, *user, follow_symlinks=False)


@dataclass(frozen=True)
class CacheRoom:
    """The size of the file system that holds the compiler cache, and what is free on it."""

    size: int  # bytes
    free: int  # bytes, for the build user

    def to_json_dict(self) -> dict[str, int]:
        """The room as the provenance's compiler cache ``file_system`` entry."""
        return {"size": self.size, "free_after_compile": self.free}


_DF_LINE = re.compile(r"^\S+\s+(\d+)\s+\d+\s+(\d+)\s+\d+%")


def cache_room(container: Container, user: str) -> CacheRoom | None:
    """``df -Pk`` of the cache folder in the build container; None when it cannot be read."""
    try:
        text = container.output(["df", "-Pk", CACHE_DIR], user=user)
    except BuildError:
        return None
    return parse_df(text)


def parse_df(text: str) -> CacheRoom | None:
    """The first file system of ``df -Pk`` output (POSIX format: 1024-byte blocks)."""
    for line in text.splitlines()[1:]:
        m = _DF_LINE.match(line.strip())
        if m:
            return CacheRoom(int(m.group(1)) * 1024, int(m.group(2)) * 1024)
    return None


def sccache_stats(container: Container, user: str) -> dict[str, object]:
    """sccache's statistics (``--show-stats --stats-format json``) from this build's daemon;
    {} when it does not answer (it never started: the compiles ran without it)."""
    try:
        text = container.output(
            ["env", f"SCCACHE_SERVER_UDS={SERVER_SOCKET}", SCCACHE_BIN, "--show-stats",
             "--stats-format", "json"],
            user=user,
        )  # fmt: skip
    except BuildError:
        return {}
    return parse_stats_json(text)
