"""The build use case: ``build_wheel(request) -> BuildResult``, and the calls beside it.

Every decision of ``archwheel build`` is made here, in this order, so that everything that can
be wrong with a request fails before any container starts: the recipe (and ``--torch``), the
Python and the base image that has it, pip's settings, the CUDA of a pinned torch, git mirrors,
the arch list, ``[repair]``, the job count, the engine; then the source (host-side git or
download), the pinned torch's wheel, and the plan. A plan-only request stops there; otherwise
the build runs under the audit gate (``runner.BuildRunner``) with its log in ``<out>/logs``.

Nothing here prints: the caller passes a ``BuildReporter`` (the interfaces floor renders the
plan, the stages and the build output; a library caller may pass none: the log only).
``compare_to_official`` and ``make_base_image`` are the other two entry points of the command.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol, TextIO

from archwheel.effects.engine import ContainerEngine, EngineName, EngineSettings, sigterm_as_exit
from archwheel.effects.owner import owned_tempdir, remove_owned
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.settings import Settings
from archwheel.effects.simple_index import project_versions
from archwheel.errors import ArchwheelError, BuildError, ToolError, UsageError
from archwheel.facts.catalog import load_facts
from archwheel.facts.pytorch_additions import load_additions
from archwheel.inspection.build_files import tree_progress
from archwheel.verdicts.build_files import (
    BuildFilesProof,
    ObjectCheck,
    check_objects,
    prove_steps,
)
from archwheel.verdicts.link_needs import (
    LibraryLinks,
    link_needs,
    provided_by,
    system_libraries,
)
from archwheel.wheelbuild.compile.dist_farm import dist_farm_option
from archwheel.wheelbuild.compile.jobs import check_jobs, choose_jobs, detect_host_resources
from archwheel.wheelbuild.compile.remote_cache import CacheUrl
from archwheel.wheelbuild.images.baseimage import DEFAULT_SUITE, BaseImage, ensure_base_image
from archwheel.wheelbuild.images.host_compiler import with_host_compiler
from archwheel.wheelbuild.images.python_base import BaseChoice, with_base_for
from archwheel.wheelbuild.images.toolkit import prepare_torch, with_torch_cuda
from archwheel.wheelbuild.planning.plan import (
    BUILD_SRC,
    DEFAULT_CCACHE_SIZE,
    DEFAULT_CCACHE_VOLUME,
    BuildOptions,
    BuildPlan,
    CheckedArchList,
    StopAfter,
    build_user,
    check_arch_list,
    choose_python,
    make_plan,
)
from archwheel.wheelbuild.recipes.recipe_lookup import find_recipe
from archwheel.wheelbuild.recipes.recipe_model import Recipe, SourceSpec
from archwheel.wheelbuild.recipes.recipe_torch import with_torch
from archwheel.wheelbuild.recipes.torch_pin import TorchWheel
from archwheel.wheelbuild.run.kept_tree import PREVIEW_FOLDER, check_name, kept_tree
from archwheel.wheelbuild.run.output import BuildOutput
from archwheel.wheelbuild.runner import BuildRunner, BuiltWheel
from archwheel.wheelbuild.sources.debian_depends import with_build_depends
from archwheel.wheelbuild.sources.debian_source import DebianFetch, DebianTree, fetch_debian_source
from archwheel.wheelbuild.sources.index_sdist import locate_sdist
from archwheel.wheelbuild.sources.project_constraints import project_check
from archwheel.wheelbuild.sources.source import ResolvedSource, resolve_source
from archwheel.wheelbuild.sources.source_check import look_at_source, switch_row
from archwheel.wheelbuild.wheel.module_gate import UnbuiltForecast, forecast_unbuilt
from archwheel.wheelbuild.wheel.official import OfficialComparison, compare_official
from archwheel.wheelbuild.wheel.preview import PreviewInputs, RepairPreview, repair_preview
from archwheel.wheelbuild.wheel.repair import RepairSpec, spec_for_recipe

LineSink = Callable[[str], None]


@dataclass(frozen=True)
class PipRequest:
    """How pip inside the container finds packages, as asked for (``build``'s pip options)."""

    ca_bundle: str | None = None  # a PEM file, or "none"
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    host_config: bool = True  # start from this host's pip configuration

    def settings(self) -> PipSettings:
        """The pip settings for the container: the host's config (unless off) with the request's
        options, ``ca_bundle = "none"`` dropping the CA bundle.
        """
        base = PipSettings.from_host() if self.host_config else PipSettings()
        no_ca = bool(self.ca_bundle) and str(self.ca_bundle).lower() == "none"
        ca = Path(self.ca_bundle) if self.ca_bundle and not no_ca else None
        settings = base.override(
            index_url=self.index_url,
            extra_index_urls=self.extra_index_urls,
            find_links=self.find_links,
            ca_bundle=ca,
        )
        if no_ca:
            settings = PipSettings(
                settings.index_url, settings.extra_index_urls, settings.find_links,
                settings.trusted_hosts, None,
            )  # fmt: skip
        return settings.validated()


@dataclass(frozen=True)
class BuildRequest:
    """One build, as asked for: ``archwheel build``'s options, or a library caller's.

    ``arch`` is the list as written (``"8.0;9.0+PTX"``; None: the recipe's default): how it
    reads depends on the recipe (its arch variable's grammar), so it is checked once, against
    the recipe, into the ``CheckedArchList`` the plan carries. ``jobs`` is checked once too
    (1 to ``MAX_JOBS``) and becomes the plan's ``JobCount``; ``python`` is defaulted once.
    """

    recipe: str | None = None  # a recipe name or .toml path; None: the newest PyTorch recipe
    arch: str | None = None
    python: str | None = None  # X.Y, or X.Yt; None: the recipe's first
    torch: str | None = None  # replaces the recipe's torch pin
    jobs: int | None = None  # None: from the cores and the memory
    out: Path = Path("dist")
    engine: EngineName = "docker"
    check_reproducible: bool = False
    ccache_volume: str | None = DEFAULT_CCACHE_VOLUME  # None: no compiler cache
    ccache_size: str = DEFAULT_CCACHE_SIZE
    cache_url: CacheUrl | None = None  # a remote compiler cache shared between machines
    # A compile farm (dist_farm.py): the scheduler's URL and the file holding its token, as
    # given (the token is read, and both checked, when the plan is made: dist_farm_option)
    dist_scheduler: str | None = None
    dist_token_file: Path | None = None
    dist_required: bool = False  # refuse to build when the farm cannot take the jobs
    pip: PipRequest = field(default_factory=PipRequest)
    git_mirrors: tuple[str, ...] = ()  # PUBLIC=MIRROR, added to the recipe's [source] mirror
    keep_work: bool = False
    plan_only: bool = False  # decide everything, build nothing
    stop_after: StopAfter | None = None  # "configure": configure, prove the build files, stop
    targets: tuple[str, ...] = ()  # a partial build: these ninja targets or sources, audited
    work_name: str | None = None  # keep the build tree under this name, resume it (kept_tree.py)
    # The recipe folders, the cache, the engine's and the base image's settings (the edge
    # reads them: Settings.from_environ; the default is archwheel's defaults).
    settings: Settings = field(default_factory=Settings)


@dataclass(frozen=True)
class BuildResult:
    """What ``build_wheel`` did: the plan, and for a build the audited wheel and its log."""

    plan: BuildPlan
    repair: RepairSpec | None  # the recipe's [repair], resolved
    built: BuiltWheel | None = None  # None: a plan-only request
    log: Path | None = None
    configured: ConfiguredBuild | None = None  # a build that stopped after configure


@dataclass(frozen=True)
class ConfiguredBuild:
    """A build stopped after its configure step: each build file it wrote, proved against the
    arch list (``verdicts.build_files``), and the work folder where ``--keep-work`` kept it."""

    proofs: tuple[BuildFilesProof, ...]
    kept: Path | None
    objects: tuple[ObjectCheck, ...] = ()  # a partial build's objects, audited
    partial: bool = False  # --targets: objects were built
    preview: RepairPreview | None = None  # the repair step on a partial build's libraries
    links: tuple[LibraryLinks, ...] = ()  # what each library will link from outside the tree
    provided: tuple[str, ...] = ()  # of those, what the recipe's [repair] requirements provide
    unbuilt: UnbuiltForecast | None = None  # CUDA sources no step compiles (the module gate's)

    @property
    def arch_ok(self) -> bool:
        """The arch list alone: every build file proved, every object built as its step says."""
        proved = bool(self.proofs) and all(proof.ok for proof in self.proofs)
        return proved and all(check.ok for check in self.objects)

    @property
    def host_libraries(self) -> tuple[str, ...]:
        """The system libraries the build links that no declared requirement provides: what a
        wheel of it needs on the host unless the repair step bundles them."""
        return tuple(n for n in system_libraries(self.links) if n not in self.provided)

    @property
    def ok(self) -> bool:
        """Every build file's CUDA steps carry the arch list (and only PyTorch's additions);
        after a partial build, each CUDA object it holds is what its step said (targets with
        no CUDA source, c10 and c10_cuda, have none to audit: the output says so)."""
        return self.arch_ok and (self.unbuilt is None or not self.unbuilt.missing)


class BuildReporter(Protocol):
    """How a build reports while it runs; the use case itself never prints."""

    @property
    def echo(self) -> LineSink | None:
        """Host-side lines before any container (downloads, git); None: quiet."""

    def planned(self, plan: BuildPlan, repair: RepairSpec | None) -> None:
        """The plan is made (printed before anything runs, so every log says what ran)."""

    def running(self, log: TextIO) -> AbstractContextManager[BuildOutput]:
        """The build's output while it runs: into ``log`` always, and where else it shows."""


class LogOnly:
    """The reporter of a caller that shows nothing: the build's output goes to its log only."""

    echo: LineSink | None = None

    def planned(self, plan: BuildPlan, repair: RepairSpec | None) -> None:
        """Show nothing."""

    @contextmanager
    def running(self, log: TextIO) -> Iterator[BuildOutput]:
        """The build's output, into ``log`` only."""
        yield BuildOutput(log)


@dataclass(frozen=True)
class _Resolved:
    """A request read against its recipe: everything ``compare_to_official`` needs too."""

    recipe: Recipe  # its [toolchain] base_image: the base chosen for the Python
    python: str
    pip: PipSettings
    arch: CheckedArchList
    base: BaseChoice
    torch_wheel: TorchWheel | None = None  # the pinned torch's, where reading it gave the CUDA


def _resolve(request: BuildRequest, echo: LineSink | None) -> _Resolved:
    facts = load_facts()
    cache = request.settings.cache
    recipe = find_recipe(request.recipe, request.settings.recipe_dirs(), facts)
    pip = request.pip.settings()
    if request.torch is not None:
        check_torch_release(request.torch, pip)
        recipe = with_torch(recipe, request.torch)
    python = choose_python(recipe, request.python)
    # The base image that has this Python (refused here when none does).
    recipe, base = with_base_for(recipe, python)
    # No [toolchain] cuda: the pinned torch wheel's CUDA (the wheel is fetched once, cached,
    # and read once: prepare_torch gets it).
    recipe, torch_wheel = with_torch_cuda(recipe, python, pip, cache, facts=facts, sink=echo)
    # A base whose gcc is newer than this CUDA's nvcc accepts: an older g++ for nvcc.
    recipe, host = with_host_compiler(recipe)
    if host is not None:
        base = dataclasses.replace(base, why=f"{base.why}; {host}")
    if request.git_mirrors:
        recipe = with_git_mirrors(recipe, request.git_mirrors)
    arch = check_arch_list(recipe, request.arch, facts)
    return _Resolved(recipe, python, pip, arch, base, torch_wheel)


def check_torch_release(version: str, pip: PipSettings) -> None:
    """``--torch VERSION`` refused, naming the releases the index has, when no configured index
    holds it (an index that cannot be reached is not asked: the torch step reports that)."""
    versions = project_versions("torch", pip)
    if versions is None or version in versions:
        return
    public = [v for v in versions if "+" not in v]
    series = ".".join(version.split(".")[:2]) + "."
    near = [v for v in public if v.startswith(series)][-3:]
    newest = ", ".join(public[-6:]) or "none"
    raise UsageError(
        f"torch {version} is not on the package index (its newest releases: {newest})",
        hint=f"of {series}x it has {', '.join(near)}" if near else "give a release the index has",
    )


def build_wheel(request: BuildRequest, reporter: BuildReporter | None = None) -> BuildResult:
    """Plan the build and (unless ``plan_only``) run it: the wheel reaches ``request.out``
    only after the audit gate. Raises the ``ArchwheelError`` that stopped it."""
    reporter = reporter or LogOnly()
    echo = reporter.echo
    # 1. Everything that can be wrong with the request fails here, before any container.
    resolved = _resolve(request, echo)
    recipe = resolved.recipe
    repair = spec_for_recipe(recipe)  # [repair]: a missing pin table is refused here (exit 2)
    check_jobs(request.jobs)
    farm = dist_farm_option(
        request.dist_scheduler, request.dist_token_file, required=request.dist_required
    )
    cache = request.settings.cache
    settings = EngineSettings.create(request.engine, request.settings)
    jobs = choose_jobs(detect_host_resources(), recipe.build.memory_per_job_gib, request.jobs)
    options = BuildOptions(
        python=resolved.python,
        out=request.out.resolve(),
        engine=settings.name,
        check_reproducible=request.check_reproducible,
        ccache_volume=request.ccache_volume,
        ccache_size=request.ccache_size,
        cache_url=request.cache_url,
        farm=farm,
        stop_after=request.stop_after,
        targets=request.targets,
        work_name=check_name(request.work_name) if request.work_name else None,
    )

    # 2. The source (host-side git or download; still no container), then the plan.
    # An sdist named by project and version: its URL on the index pip is configured with.
    # A plan (--plan) is made without the network when it must: what cannot be reached now is
    # marked "resolved when the build runs"; a build stops there.
    unreachable = ""
    if recipe.source.project:
        try:
            located = locate_sdist(recipe.source, resolved.pip, recipe=recipe.path, echo=echo)
            recipe = dataclasses.replace(recipe, source=located)
        except ToolError as exc:
            if not request.plan_only:
                raise
            unreachable = exc.one_line()
    # A pinned torch: its wheel (cached), its CUDA, its toolkit pin; contradictions exit 2.
    torch = prepare_torch(
        recipe, resolved.python, resolved.pip, cache, sink=echo, wheel=resolved.torch_wheel
    )
    epoch = recipe.source_date_epoch
    if unreachable:
        source = ResolvedSource.not_resolved(recipe.source, unreachable, epoch)
    else:
        try:
            source = resolve_source(
                recipe.source,
                cache,
                recipe_epoch=epoch,
                echo=echo,
                debian=_debian_fetcher(settings, request.settings.debian_mirror, echo),
            )
        except ToolError as exc:
            if not request.plan_only:
                raise
            source = ResolvedSource.not_resolved(recipe.source, exc.one_line(), epoch)
    depends = None  # the Build-Depends of a Debian source package (debian_depends.py)
    if not source.unresolved:
        recipe, depends = with_build_depends(recipe, source.root)
    checked: tuple[tuple[str, str], ...] = ()
    look = None
    ninja_off: tuple[str, ...] | None = None  # not known until the source is read
    own_threads: tuple[str, ...] = ()
    project = None  # the project's own constraints: a Python it excludes stops here (exit 2)
    if not source.unresolved:
        look = look_at_source(
            source.root, source.files, recipe.arch.variable, resolved.arch.arch_list,
            consumer=recipe.arch.consumer, arch_value=resolved.arch.value,
            recipe_env=recipe.build.env,
        )  # fmt: skip
        checked, ninja_off, own_threads = look.rows, look.ninja_off, look.own_threads
        project = project_check(recipe, source, resolved.python, torch)
    plan = make_plan(
        recipe,
        resolved.arch,
        options,
        source,
        jobs=jobs,
        pip=resolved.pip,
        user=build_user(),
        torch=torch,
        ninja_off=ninja_off,
        own_threads=own_threads,
    )
    if look is not None:  # the switches, once the plan says what archwheel sets itself
        checked += switch_row(look.check, recipe.build.env, plan.build_env)
    plan = dataclasses.replace(
        plan, source_check=checked, project=project, base_choice=resolved.base.why,
        selection=look.selection if look is not None else None,
        build_depends=depends.row() if depends is not None else "",
    )  # fmt: skip
    reporter.planned(plan, repair)
    if request.plan_only:
        return BuildResult(plan, repair)

    # 3. Build, with its log, in a kept build tree where it has a name.
    log_path = _log_path(plan)
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(log_path.open("w"))
        output = stack.enter_context(reporter.running(log))
        log.write(log_header(plan))
        kept = (
            stack.enter_context(kept_tree(cache, plan.work_name, plan)) if plan.work_name else None
        )
        if kept is not None:
            output.line(
                f"{'resuming' if kept.resumed else 'keeping'} the build tree {kept.name!r} in "
                f"{kept.tree} (--work-name; `archwheel clean --work {kept.name}` removes it)"
            )
            folder = plan.recipe.build.build_folder
            progress = tree_progress(kept.tree / folder) if kept.resumed and folder else None
            if progress is not None:
                output.line(f"the tree so far: {progress.line()}")
        engine = ContainerEngine(settings, echo=output.echo)
        runner = BuildRunner(
            plan,
            engine,
            output,
            repair=repair,
            docker_dir=request.settings.docker_dir(),
            keep_work=request.keep_work,
            base_mirror=request.settings.debian_mirror,
            cache=request.settings.cache,
            tree=kept.tree if kept is not None else None,
        )
        with sigterm_as_exit():
            try:
                if plan.stop_after is not None:
                    keep = kept.folder / PREVIEW_FOLDER if kept is not None else None
                    configured = _configured(runner, keep)
                    return BuildResult(plan, repair, log=log_path, configured=configured)
                built = runner.run()
            except ArchwheelError as exc:
                output.failed(exc.one_line())
                raise
    return BuildResult(plan, repair, built, log_path)


def _configured(runner: BuildRunner, keep: Path | None) -> ConfiguredBuild:
    """Configure, then prove every CUDA compile of the build files it wrote; after a partial
    build, its CUDA objects audited and its libraries repaired as the wheel will be (the
    preview wheel kept in ``keep``)."""
    staging = owned_tempdir("archwheel-preview-", runner.work_root)
    try:
        return _configured_in(runner, keep, staging)
    finally:
        remove_owned(staging)


def _configured_in(runner: BuildRunner, keep: Path | None, staging: Path) -> ConfiguredBuild:
    plan = runner.plan
    wanted = bool(plan.targets) and runner.repair is not None
    found, toolchain, builder = runner.configure(staging / "libraries" if wanted else None)
    if not found.build_steps:
        raise BuildError(
            "the configure step wrote no build.ninja with CUDA compile steps under the source",
            hint="[build] configure must configure the build (for PyTorch: "
            "python setup.py build --cmake-only) with CUDA on",
        )
    torch = plan.recipe.version if plan.recipe.kind == "pytorch" else None
    rules = load_additions()
    proofs = tuple(
        prove_steps(steps, plan.arch_list, rules, path=name, torch=torch, nvcc=toolchain.nvcc)
        for name, steps in found.build_steps
    )
    objects = tuple(
        check
        for name, steps in found.build_steps
        for check in check_objects(
            steps,
            plan.arch_list,
            rules,
            {output: images for (file, output), images in found.objects.items() if file == name},
            torch=torch,
            nvcc=toolchain.nvcc,
        )
    )
    preview = None
    if wanted and found.libraries and runner.repair is not None:
        given = PreviewInputs(
            found.libraries, runner.repair, plan.recipe, plan.python,
            plan.source.source_date_epoch,
        )  # fmt: skip
        preview = repair_preview(
            given, runner.engine, builder, staging, keep, user=plan.user, output=runner.output
        )
    links = tuple(
        entry for _, steps in found.build_steps for entry in link_needs(steps.links, BUILD_SRC)
    )
    provided = provided_by(
        system_libraries(links), runner.repair.provided if runner.repair is not None else ()
    )
    unbuilt = forecast_unbuilt(
        plan.recipe, plan.source.files, found.build_steps, BUILD_SRC, plan.selection
    )
    return ConfiguredBuild(
        proofs, found.kept, objects, partial=bool(plan.targets), preview=preview, links=links,
        provided=provided, unbuilt=unbuilt,
    )  # fmt: skip


def _debian_fetcher(
    settings: EngineSettings, mirror: str | None, echo: LineSink | None
) -> DebianFetch:
    """A Debian source package's fetcher: apt in the suite's archwheel/debian base (made by
    debootstrap when missing), as the build user (debian_source.py)."""

    def fetch(spec: SourceSpec, cache: Path) -> DebianTree:
        engine = ContainerEngine(settings, echo=echo)
        assert spec.suite is not None  # the recipe's, or its base image's (recipe.py)
        base = ensure_base_image(engine, suite=spec.suite, mirror=mirror, sink=echo)
        return fetch_debian_source(spec, cache, engine, base.tag, user=build_user(), echo=echo)

    return fetch


def _log_path(plan: BuildPlan) -> Path:
    """``<out>/logs/<recipe>-<UTC time>.log`` (the folder is made)."""
    logs = plan.out_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return logs / f"{plan.recipe.name}-{stamp}.log"


def log_header(plan: BuildPlan) -> str:
    """The plan as ``# label: value`` lines at the top of the saved log."""
    return "".join(f"# {label}: {value}\n" for label, value in plan.summary_rows())


def compare_to_official(request: BuildRequest, echo: LineSink | None = None) -> OfficialComparison:
    """Every difference between the request's build environment and the official one of its
    PyTorch release and CUDA version (``build --compare-official``); builds nothing."""
    resolved = _resolve(request, echo)
    return compare_official(resolved.recipe, resolved.arch.value if request.arch else None)


def with_git_mirrors(recipe: Recipe, given: tuple[str, ...]) -> Recipe:
    """The recipe with ``--git-mirror PUBLIC=MIRROR`` added to its ``[source] mirror``."""
    if recipe.source.kind != "git":
        raise UsageError(f"--git-mirror: recipe {recipe.name} has no git source")
    mirrors = dict(recipe.source.mirrors)
    for item in given:
        public, sep, mirror = item.partition("=")
        if not sep or not public.strip() or not mirror.strip() or mirror.startswith("-"):
            raise UsageError(f"--git-mirror {item!r}: expected PUBLIC=MIRROR (two URL prefixes)")
        mirrors[public] = mirror
    source = dataclasses.replace(recipe.source, mirrors=tuple(sorted(mirrors.items())))
    return dataclasses.replace(recipe, source=source)


# -- the base image -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BaseImageRequest:
    """``archwheel base-image``: the Debian base image to make locally."""

    engine: EngineName = "docker"
    suite: str = DEFAULT_SUITE
    mirror: str | None = None  # None: settings.debian_mirror, else debootstrap's own default
    force: bool = False
    settings: Settings = field(default_factory=Settings)
    # accept an archive copy whose Release is past its Valid-Until (images/apt_release.py)
    allow_expired_release: bool = False


def make_base_image(request: BaseImageRequest, echo: LineSink | None = None) -> BaseImage:
    """archwheel/debian:SUITE, made with debootstrap and imported (an existing one is reused
    unless ``force``)."""
    settings = EngineSettings.create(request.engine, request.settings)
    engine = ContainerEngine(settings, echo=echo)
    mirror = request.mirror or request.settings.debian_mirror
    with sigterm_as_exit():
        return ensure_base_image(
            engine,
            suite=request.suite,
            mirror=mirror,
            force=request.force,
            sink=echo,
            allow_expired_release=request.allow_expired_release,
        )
