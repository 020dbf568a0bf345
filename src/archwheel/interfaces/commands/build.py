"""``archwheel build`` and ``archwheel base-image``: reproducible wheel builds in containers.

``build`` validates the recipe and the arch list against the recipe's toolkit before anything
starts, resolves the source, prints the plan, builds in containers, and lets the wheel out only
after the audit gate (docs/builds.md). ``base-image`` makes the Debian base image locally.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from archwheel.effects.engine import (
    ENGINES,
    ContainerEngine,
    EngineName,
    EngineSettings,
    sigterm_as_exit,
)
from archwheel.effects.paths import cache_dir, docker_dir, recipe_dirs
from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import ArchwheelError, UsageError
from archwheel.exit_codes import ExitCode
from archwheel.facts.catalog import load_facts
from archwheel.interfaces.commands.options import ccache_size, check_jobs, volume_name
from archwheel.interfaces.render.build import (
    build_output,
    error_log_line,
    plan_log_header,
    print_base_image,
    print_plan,
    print_plan_json,
    print_recipes,
    print_result,
    progress,
)
from archwheel.interfaces.render.common import echo_to, literal
from archwheel.wheelbuild.baseimage import DEFAULT_SUITE, MIRROR_ENV, ensure_base_image
from archwheel.wheelbuild.index_sdist import locate_sdist
from archwheel.wheelbuild.jobs import choose_jobs, detect_host_resources
from archwheel.wheelbuild.official import compare_official
from archwheel.wheelbuild.plan import (
    DEFAULT_CCACHE_SIZE,
    DEFAULT_CCACHE_VOLUME,
    BuildOptions,
    build_user,
    check_arch_list,
    make_plan,
)
from archwheel.wheelbuild.recipe import load_recipe
from archwheel.wheelbuild.recipe_lookup import find_recipe, recipe_files
from archwheel.wheelbuild.recipe_model import Recipe
from archwheel.wheelbuild.recipe_torch import with_torch
from archwheel.wheelbuild.remote_cache import CACHE_URL_ENV, CacheUrl, parse_cache_url
from archwheel.wheelbuild.repair import spec_for_recipe
from archwheel.wheelbuild.runner import BuildRunner
from archwheel.wheelbuild.source import resolve_source
from archwheel.wheelbuild.toolkit import prepare_torch, with_torch_cuda

BUILD_EPILOG = """\
examples:
  archwheel build --recipe example --arch "8.0;9.0"          the example extension, two archs
  archwheel build --arch "9.0;12.0+PTX" --python 3.12        the newest PyTorch recipe
  archwheel build --recipe example --check-reproducible      build twice, compare the bytes
  archwheel build --recipe example --plan                    print the plan, build nothing
  archwheel build --recipe libtorch-ops --torch 2.13.0        against another torch release
  archwheel build --list-recipes

The wheel lands in --out (default dist/) only after the audit gate, with
<wheel>.provenance.json beside it; a wheel lacking a requested arch goes to dist/rejected/.
Logs: dist/logs/. ARCHWHEEL_KEEP_CONTAINERS=1 keeps containers for debugging.

exit codes: 0 built and audited, 2 bad recipe/arch list/options (also: a pinned torch with no
wheel for the Python, a CPU-only torch, a torch whose CUDA is not the recipe's), 3 an sdist
whose sha256 is not the recipe's, 4 engine or tool missing, 5 the build (also when it ran out
of memory), the reproducibility check or the audit gate failed
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "build",
        help="build a wheel for exactly your archs in a container, then audit it",
        description=(
            "Build a PyTorch or CUDA extension wheel from a recipe in a container, "
            "reproducibly, for exactly the requested architectures; the audit gate decides "
            "whether it is handed out."
        ),
        epilog=BUILD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--recipe", help="recipe name or .toml path (default: newest PyTorch)")
    parser.add_argument("--arch", help='arch list, e.g. "8.0;9.0+PTX" (default: the recipe\'s)')
    parser.add_argument(
        "--python",
        metavar="X.Y",
        help="Python version X.Y, or X.Yt for free-threaded CPython (default: the recipe's first)",
    )
    parser.add_argument(
        "--torch",
        metavar="VERSION",
        help="build against this torch instead of the one the recipe pins (e.g. 2.13.0)",
    )
    parser.add_argument("--jobs", type=int, help="compile jobs (default: from cores and memory)")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="output folder (dist/)")
    parser.add_argument("--engine", choices=ENGINES, default="docker")
    parser.add_argument(
        "--check-reproducible",
        action="store_true",
        help="build twice from clean without the compiler cache; fail naming differing files",
    )
    cache = parser.add_argument_group("compiler cache")
    cache.add_argument(
        "--ccache-volume",
        type=volume_name,
        default=DEFAULT_CCACHE_VOLUME,
        help=f"named volume of the compiler cache ({DEFAULT_CCACHE_VOLUME})",
    )
    cache.add_argument(
        "--ccache-size",
        type=ccache_size,
        default=DEFAULT_CCACHE_SIZE,
        help=f"ccache max size, as ccache -M takes it ({DEFAULT_CCACHE_SIZE})",
    )
    cache.add_argument("--no-cache", action="store_true", help="compile without the cache")
    cache.add_argument(
        "--cache-url",
        default=os.environ.get(CACHE_URL_ENV) or None,
        metavar="URL",
        help="a remote compiler cache shared between machines, on a Redis server: "
        "redis://[[USER:]PASSWORD@]HOST[:PORT][/DB] or redis+unix:/PATH/TO/SOCKET "
        f"(default ${CACHE_URL_ENV}); unreachable: the build goes on without it",
    )
    pip = parser.add_argument_group(
        "pip inside the container (default: this host's pip configuration)"
    )
    pip.add_argument("--ca-bundle", help="CA bundle (PEM) for pip, or 'none'")
    pip.add_argument("--index-url", metavar="URL", help="replace the package index")
    pip.add_argument("--extra-index-url", action="append", default=[], help="add an index")
    pip.add_argument("--find-links", action="append", default=[], help="add a wheel folder/URL")
    pip.add_argument(
        "--no-host-pip-config", action="store_true", help="ignore this host's pip configuration"
    )
    parser.add_argument("--plan", action="store_true", help="print the plan and stop")
    parser.add_argument(
        "--git-mirror",
        action="append",
        default=[],
        metavar="PUBLIC=MIRROR",
        help="fetch a git source and all its submodules from a mirror: every URL starting with "
        "PUBLIC is fetched from MIRROR instead (repeatable; adds to the recipe's [source] mirror)",
    )
    parser.add_argument(
        "--compare-official",
        action="store_true",
        help="list every difference between the recipe's build environment and the official "
        "one of its PyTorch release and CUDA version, and stop (exit 1 when one is unexplained)",
    )
    parser.add_argument("--list-recipes", action="store_true", help="list recipes and stop")
    parser.add_argument("--keep-work", action="store_true", help="keep the work folder")
    parser.add_argument("--quiet", "-q", action="store_true", help="build output to the log only")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)

    base = subparsers.add_parser(
        "base-image",
        help="make the Debian base image locally (debootstrap + import; no registry needed)",
        description=(
            "Make archwheel/debian:SUITE with debootstrap --variant=minbase and import it into "
            "the container engine. An existing image is reused unless --force."
        ),
    )
    base.add_argument("--engine", choices=ENGINES, default="docker")
    base.add_argument("--suite", default=DEFAULT_SUITE, help=f"Debian suite ({DEFAULT_SUITE})")
    base.add_argument(
        "--mirror",
        default=None,
        help=f"Debian mirror URL (default: ${MIRROR_ENV}, else debootstrap's own default)",
    )
    base.add_argument("--force", action="store_true", help="rebuild even if it exists")
    base.add_argument("--format", choices=("text", "json"), default="text")
    base.set_defaults(func=run_base_image)


@dataclass(frozen=True)
class PipRequest:
    """The pip options of ``build``, as given."""

    ca_bundle: str | None
    index_url: str | None
    extra_index_urls: tuple[str, ...]
    find_links: tuple[str, ...]
    host_config: bool

    def settings(self) -> PipSettings:
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
    """``archwheel build``, parsed."""

    recipe: str | None
    arch: str | None
    python: str | None  # a version X.Y
    jobs: int | None
    out: Path
    engine: EngineName
    check_reproducible: bool
    ccache_volume: str | None  # None: --no-cache
    ccache_size: str
    pip: PipRequest
    plan_only: bool
    list_recipes: bool
    compare_official: bool
    git_mirrors: tuple[str, ...]
    keep_work: bool
    quiet: bool
    format: str
    torch: str | None = None  # --torch: replaces the recipe's torch pin
    cache_url: CacheUrl | None = None  # --cache-url, parsed

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BuildRequest:
        cache_url = cache_url_option(args.cache_url, no_cache=args.no_cache)
        return cls(
            cache_url=cache_url,
            recipe=args.recipe,
            arch=args.arch,
            python=args.python,
            jobs=args.jobs,
            out=args.out,
            engine=args.engine,
            check_reproducible=args.check_reproducible,
            ccache_volume=None if args.no_cache else args.ccache_volume,
            ccache_size=args.ccache_size,
            pip=PipRequest(
                ca_bundle=args.ca_bundle,
                index_url=args.index_url,
                extra_index_urls=tuple(args.extra_index_url),
                find_links=tuple(args.find_links),
                host_config=not args.no_host_pip_config,
            ),
            plan_only=args.plan,
            list_recipes=args.list_recipes,
            compare_official=args.compare_official,
            git_mirrors=tuple(args.git_mirror),
            keep_work=args.keep_work,
            quiet=args.quiet,
            format=args.format,
            torch=args.torch,
        )


@dataclass(frozen=True)
class BaseImageRequest:
    """``archwheel base-image``, parsed."""

    engine: EngineName
    suite: str
    mirror: str | None  # None: $MIRROR_ENV, else debootstrap's own default
    force: bool
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BaseImageRequest:
        return cls(
            engine=args.engine,
            suite=args.suite,
            mirror=args.mirror,
            force=args.force,
            format=args.format,
        )


# -- archwheel build ----------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    return build(BuildRequest.from_args(args))


def build(request: BuildRequest) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    facts = load_facts()
    if request.list_recipes:
        return _list_recipes(out, request.format)

    # 1. Everything that can be wrong with the request fails here, before any container.
    recipe = find_recipe(request.recipe, recipe_dirs(), facts)
    if request.torch is not None:
        recipe = with_torch(recipe, request.torch)
    python = request.python or recipe.default_python
    if python not in recipe.python_versions:
        raise UsageError(
            f"recipe {recipe.name} does not support Python {python}",
            hint=f"supported: {', '.join(recipe.python_versions)}",
        )
    pip = request.pip.settings()
    line_echo = None if request.quiet else echo_to(err)
    # No [toolchain] cuda: the pinned torch wheel's CUDA (the wheel is fetched once, cached).
    recipe = with_torch_cuda(recipe, python, pip, cache_dir(), facts=facts, sink=line_echo)
    if request.git_mirrors:
        recipe = with_git_mirrors(recipe, request.git_mirrors)
    arch = check_arch_list(recipe, request.arch, facts)
    if request.compare_official:
        comparison = compare_official(recipe, arch.value if request.arch else None)
        if request.format == "json":
            out.print_json(data=comparison.to_json_dict())
        else:
            for line in comparison.lines():
                out.print(literal(line), markup=False)
        return int(ExitCode.VERDICT_FAILED) if comparison.unexplained else int(ExitCode.OK)
    repair = spec_for_recipe(recipe)  # [repair]: a missing pin table is refused here (exit 2)
    check_jobs(request.jobs)
    settings = EngineSettings.create(request.engine, config_dir=cache_dir())
    jobs = choose_jobs(detect_host_resources(), recipe.build.memory_per_job_gib, request.jobs)
    options = BuildOptions(
        arch=request.arch,
        python=python,
        jobs=request.jobs,
        out=request.out.resolve(),
        engine=settings.name,
        check_reproducible=request.check_reproducible,
        ccache_volume=request.ccache_volume,
        ccache_size=request.ccache_size,
        cache_url=request.cache_url,
    )

    # 2. The source (host-side git or download; still no container), then the plan.
    # An sdist named by project and version: its URL on the index pip is configured with.
    if recipe.source.project:
        located = locate_sdist(recipe.source, pip, recipe=recipe.path, echo=line_echo)
        recipe = dataclasses.replace(recipe, source=located)
    # A pinned torch: its wheel (cached), its CUDA, its toolkit pin; contradictions exit 2.
    torch = prepare_torch(recipe, python, pip, cache_dir(), sink=line_echo)
    source = resolve_source(
        recipe.source,
        cache_dir(),
        recipe_epoch=recipe.source_date_epoch,
        echo=line_echo,
    )
    plan = make_plan(
        recipe, arch, options, source, jobs=jobs, pip=pip, user=build_user(), torch=torch
    )
    print_plan(err, plan)
    if repair is not None:
        err.print(literal(f"repair: {repair.describe()}"), markup=False, highlight=False)
    if request.plan_only:
        if request.format == "json":
            print_plan_json(out, plan)
        return 0

    # 3. Build.
    logs = options.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    log_path = logs / f"{recipe.name}-{stamp}.log"
    with log_path.open("w") as log, progress(err, request.quiet) as live:
        log.write(plan_log_header(plan))
        output = build_output(log, err, live, quiet=request.quiet)
        engine = ContainerEngine(settings, echo=output.echo)
        runner = BuildRunner(
            plan, engine, output, docker_dir=docker_dir(), keep_work=request.keep_work
        )
        with sigterm_as_exit():
            try:
                result = runner.run()
            except ArchwheelError as exc:
                log.write(error_log_line(exc.one_line()))
                raise
    print_result(out=out, result=result, log_path=log_path, fmt=request.format)
    return 0


def cache_url_option(text: str | None, *, no_cache: bool) -> CacheUrl | None:
    """``--cache-url`` parsed (a bad URL: one-line usage error, exit 2)."""
    if text is None:
        return None
    url = parse_cache_url(text)
    if no_cache:
        raise UsageError(
            "--cache-url needs the compiler cache, and --no-cache turns it off",
            hint="drop one of them",
        )
    return url


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


def _list_recipes(out: Console, fmt: str) -> int:
    facts = load_facts()
    rows = []
    for path in recipe_files(recipe_dirs()):
        recipe = load_recipe(path, facts)
        rows.append(
            {
                "name": recipe.name,
                "kind": recipe.kind,
                "version": recipe.version,
                "cuda": str(recipe.toolchain.cuda or "from torch"),
                "base_image": recipe.toolchain.base_image,
                "default_arch": str(recipe.arch.default),
                "path": str(path),
            }
        )
    print_recipes(out, rows, fmt)
    return 0


# -- archwheel base-image -----------------------------------------------------------------------


def run_base_image(args: argparse.Namespace) -> int:
    request = BaseImageRequest.from_args(args)
    err = Console(stderr=True, highlight=False)
    settings = EngineSettings.create(request.engine, config_dir=cache_dir())
    engine = ContainerEngine(settings, echo=echo_to(err))
    with sigterm_as_exit():
        image = ensure_base_image(
            engine,
            suite=request.suite,
            mirror=request.mirror,
            force=request.force,
            sink=echo_to(err),
        )
    print_base_image(image, request.format)
    return 0
