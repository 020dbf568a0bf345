"""``archwheel build`` and ``archwheel base-image``: reproducible wheel builds in containers.

This module turns argv into the build use case's typed request (``wheelbuild.BuildRequest``),
makes one call (``build_wheel``, or ``compare_to_official``, ``list_recipes``,
``make_base_image``) and hands the result to ``render/build.py``. Every decision of a build is
the use case's (docs/builds.md).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from archwheel.effects import ENGINES
from archwheel.errors import UsageError
from archwheel.exit_codes import ExitCode
from archwheel.interfaces.commands.options import (
    ccache_size,
    check_folder,
    environment_settings,
    location_text,
    path_argument,
    version_text,
    volume_name,
    whole_number,
)
from archwheel.interfaces.render.build import (
    ConsoleReporter,
    print_base_image,
    print_comparison,
    print_configured,
    print_plan_json,
    print_recipes,
    print_result,
)
from archwheel.interfaces.render.common import echo_to, plain
from archwheel.wheelbuild import (
    CACHE_URL_ENV,
    DEFAULT_CCACHE_SIZE,
    DEFAULT_CCACHE_VOLUME,
    DEFAULT_SUITE,
    MIRROR_ENV,
    BaseImageRequest,
    BuildRequest,
    BuildResult,
    CacheUrl,
    PipRequest,
    build_wheel,
    compare_to_official,
    list_recipes,
    make_base_image,
    parse_cache_url,
)

if TYPE_CHECKING:
    from archwheel.effects import Settings

BUILD_EPILOG = """\
examples:
  archwheel build --recipe example --arch "8.0;9.0"          the example extension, two archs
  archwheel build --arch "9.0;12.0+PTX" --python 3.12        the newest PyTorch recipe
  archwheel build --recipe example --check-reproducible      build twice, compare the bytes
  archwheel build --recipe example --plan                    print the plan, build nothing
  archwheel build --recipe pytorch-2.6.0-debian-cu130 --stop-after configure --work-name pt
                       configure PyTorch, prove the arch list of every CUDA compile, keep the tree
  archwheel build --recipe pytorch-2.6.0-debian-cu130 --work-name pt     build on from there
  archwheel build --recipe libtorch-ops --torch 2.13.0        against another torch release
  archwheel build --list-recipes

The wheel lands in --out (default dist/) only after the audit gate, with
<wheel>.provenance.json beside it; a wheel lacking a requested arch goes to dist/rejected/.
Logs: dist/logs/. ARCHWHEEL_KEEP_CONTAINERS=1 keeps containers for debugging.

exit codes: 0 built and audited, 2 bad recipe/arch list/options (also: a pinned torch with no
wheel for the Python, a CPU-only torch, a torch whose CUDA is not the recipe's), 3 an sdist
whose sha256 is not the recipe's (2 also: a compile farm that refuses the token of
--dist-token-file), 4 engine or tool missing (also: --dist-required and the farm cannot
be reached), 5 the build (also when it ran out
of memory), the reproducibility check or the audit gate failed
"""


def register(subparsers: Any) -> None:
    """Add ``build`` and ``base-image`` to the command line, with their flags, help and examples
    (``cli.build_parser`` calls each command module's ``register`` with its subparsers)."""
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
        type=version_text,
        metavar="X.Y",
        help="Python version X.Y, or X.Yt for free-threaded CPython (default: the recipe's first)",
    )
    parser.add_argument(
        "--torch",
        type=version_text,
        metavar="VERSION",
        help="build against this torch instead of the one the recipe pins (e.g. 2.13.0)",
    )
    parser.add_argument(
        "--jobs", type=whole_number, help="compile jobs (default: from cores and memory)"
    )
    parser.add_argument(
        "--out", type=path_argument, default=Path("dist"), help="output folder (dist/)"
    )
    parser.add_argument("--engine", choices=ENGINES, default="docker")
    parser.add_argument(
        "--check-reproducible",
        action="store_true",
        help="build twice from clean without the compiler cache; fail naming differing files",
    )
    cache = parser.add_argument_group("compiler cache")
    cache.add_argument(
        "--cache-volume",
        dest="ccache_volume",
        metavar="VOLUME",
        type=volume_name,
        default=DEFAULT_CCACHE_VOLUME,
        help=f"named volume of the compiler cache (sccache's local storage; "
        f"{DEFAULT_CCACHE_VOLUME}); --ccache-volume is its old spelling",
    )
    # the spellings of the ccache days, kept as aliases (docs/commands.md), out of --help
    cache.add_argument(
        "--ccache-volume", dest="ccache_volume", type=volume_name, help=argparse.SUPPRESS
    )
    cache.add_argument(
        "--cache-size",
        dest="ccache_size",
        metavar="SIZE",
        type=ccache_size,
        default=DEFAULT_CCACHE_SIZE,
        help=f"sccache's max size, as SCCACHE_CACHE_SIZE takes it ({DEFAULT_CCACHE_SIZE}); "
        "--ccache-size is its old spelling",
    )
    cache.add_argument(
        "--ccache-size", dest="ccache_size", type=ccache_size, help=argparse.SUPPRESS
    )
    cache.add_argument("--no-cache", action="store_true", help="compile without the cache")
    cache.add_argument(
        "--cache-url",
        default=None,
        metavar="URL",
        help="a remote compiler cache shared between machines, on a Redis server: "
        "redis://[[USER:]PASSWORD@]HOST[:PORT][/DB] or redis+unix:/PATH/TO/SOCKET "
        f"(default ${CACHE_URL_ENV}); unreachable: the build goes on without it",
    )
    add_farm_options(parser)
    pip = parser.add_argument_group(
        "pip inside the container (default: this host's pip configuration)"
    )
    pip.add_argument("--ca-bundle", help="CA bundle (PEM) for pip, or 'none'")
    pip.add_argument(
        "--index-url", type=location_text, metavar="URL", help="replace the package index"
    )
    pip.add_argument(
        "--extra-index-url", type=location_text, action="append", default=[], help="add an index"
    )
    pip.add_argument(
        "--find-links",
        type=location_text,
        action="append",
        default=[],
        help="add a wheel folder/URL",
    )
    pip.add_argument(
        "--no-host-pip-config", action="store_true", help="ignore this host's pip configuration"
    )
    parser.add_argument("--plan", action="store_true", help="print the plan and stop")
    parser.add_argument(
        "--targets",
        metavar="T[,T...]",
        type=lambda text: tuple(t for t in text.replace(",", " ").split() if t),
        default=(),
        help="a partial build: after configure, ninja builds only these targets (c10, "
        "c10_cuda) or the objects of these source files (aten/src/ATen/cuda/Sleep.cu); "
        "each CUDA object is audited against its step, no wheel (exit 5 when one differs)",
    )
    parser.add_argument(
        "--stop-after",
        choices=("configure",),
        help="run the recipe's [build] configure step, prove the arch list in every CUDA "
        "compile of the build files it wrote, and stop without a wheel (exit 5 when a step "
        "deviates)",
    )
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
    parser.add_argument(
        "--work-name",
        metavar="NAME",
        help="keep the build's tree under NAME in archwheel's cache and resume it when a build "
        "with the same inputs names it again (a killed, timed-out or --stop-after build goes "
        "on where it stopped); `archwheel clean --work NAME` removes it",
    )
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
    base.add_argument(
        "--allow-expired-release",
        action="store_true",
        help="accept an archive copy whose Release is past its Valid-Until (a mirror that is no "
        "longer refreshed): apt in this image skips the date check, signatures still checked",
    )
    base.add_argument("--format", choices=("text", "json"), default="text")
    base.set_defaults(func=run_base_image)


@dataclass(frozen=True)
class BuildCommand:
    """``archwheel build``, parsed: the use case's request and how to show what it does."""

    request: BuildRequest
    list_recipes: bool = False
    compare_official: bool = False
    quiet: bool = False
    format: str = "text"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BuildCommand:
        """The command of parsed ``args``: the build request with the pip, cache and engine flags
        resolved (a bad cache URL: exit 2)."""
        settings = environment_settings()
        cache_url = cache_url_option(
            settings.cache_url if args.cache_url is None else args.cache_url,
            no_cache=args.no_cache,
        )
        request = BuildRequest(
            recipe=args.recipe,
            arch=args.arch,
            python=args.python,
            torch=args.torch,
            jobs=args.jobs,
            out=args.out,
            engine=args.engine,
            check_reproducible=args.check_reproducible,
            ccache_volume=None if args.no_cache else args.ccache_volume,
            ccache_size=args.ccache_size,
            cache_url=cache_url,
            **farm_request_fields(args, settings),
            pip=PipRequest(
                ca_bundle=args.ca_bundle,
                index_url=args.index_url,
                extra_index_urls=tuple(args.extra_index_url),
                find_links=tuple(args.find_links),
                host_config=not args.no_host_pip_config,
            ),
            git_mirrors=tuple(args.git_mirror),
            keep_work=args.keep_work,
            plan_only=args.plan,
            stop_after=args.stop_after,
            targets=args.targets,
            work_name=args.work_name,
            settings=settings,
        )
        return cls(
            request=request,
            list_recipes=args.list_recipes,
            compare_official=args.compare_official,
            quiet=args.quiet,
            format=args.format,
        )


def add_farm_options(parser: argparse.ArgumentParser) -> None:
    """``--dist-scheduler``, ``--dist-token-file``, ``--dist-required``: a compile farm (an
    sccache-dist scheduler and its build servers), for ``build`` and ``matrix``."""
    farm = parser.add_argument_group("compile farm (sccache-dist)")
    farm.add_argument(
        "--dist-scheduler",
        default=None,
        metavar="URL",
        help="send compile jobs to this sccache-dist scheduler, http(s)://HOST[:PORT] "
        "(default $ARCHWHEEL_DIST_SCHEDULER); unreachable: one warning and a local build",
    )
    farm.add_argument(
        "--dist-token-file",
        type=path_argument,
        default=None,
        metavar="FILE",
        help="the file holding the scheduler's client token, one line; the token never goes "
        "on the command line, into the container, a log or the provenance "
        "(default $ARCHWHEEL_DIST_TOKEN_FILE)",
    )
    farm.add_argument(
        "--dist-required",
        action="store_true",
        help="refuse to build (exit 4) when the farm cannot take the jobs, instead of "
        "compiling locally (default $ARCHWHEEL_DIST_REQUIRED)",
    )


def farm_request_fields(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """The request's farm fields: each option, else its setting (checked when the plan is
    made: ``dist_farm.dist_farm_option``)."""
    return {
        "dist_scheduler": args.dist_scheduler or settings.dist_scheduler,
        "dist_token_file": args.dist_token_file or settings.dist_token_file,
        "dist_required": bool(args.dist_required or settings.dist_required),
    }


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


# -- archwheel build ----------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """``archwheel build``: parse the flags and run ``build``."""
    return build(BuildCommand.from_args(args))


def build(command: BuildCommand) -> int:
    """Run ``command``: list the recipes, compare with the official wheel, or build (``--plan``:
    plan only) and print the result; the exit code."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    if command.list_recipes:
        print_recipes(out, list_recipes(command.request.settings), command.format)
        return 0
    # build --plan answers with the plan: on standard output (as text; with --format json the
    # document is the answer there and the table stays on standard error with the messages).
    plan_text = command.request.plan_only and command.format == "text"
    reporter = ConsoleReporter(
        err,
        quiet=command.quiet,
        plan_console=out if plan_text else None,
        events=command.format == "json" and not command.request.plan_only,
    )
    if command.compare_official:
        comparison = compare_to_official(command.request, echo=reporter.echo)
        print_comparison(out, comparison, command.format)
        return int(ExitCode.VERDICT_FAILED) if comparison.unexplained else int(ExitCode.OK)
    check_folder(command.request.out)  # --plan too: a plan naming an --out that cannot work
    result = build_wheel(command.request, reporter)
    if result.configured is not None:  # --stop-after configure
        return _configured(out, err, result, command.format)
    if result.built is None:  # --plan
        if command.format == "json":
            print_plan_json(out, result.plan)
        return 0
    assert result.log is not None
    print_result(out=out, result=result.built, log_path=result.log, fmt=command.format)
    return 0


def _configured(out: Console, err: Console, result: BuildResult, fmt: str) -> int:
    """A build stopped after configure: the proof of each build file it wrote; exit 5 when
    one deviates."""
    configured = result.configured
    assert configured is not None
    print_configured(out, configured, result.log, fmt)
    if configured.ok:
        return int(ExitCode.OK)
    what = "the objects built" if configured.partial else "the build files"
    unbuilt = configured.unbuilt is not None and configured.unbuilt.missing
    reason = (
        "CUDA sources no step compiles would fail the module gate (the GATE line above)"
        if unbuilt and configured.arch_ok
        else f"{what} do not carry the arch list exactly (the lines above)"
    )
    err.print(plain(f"error: {reason}"), soft_wrap=True)
    return int(ExitCode.BUILD)


# -- archwheel base-image -----------------------------------------------------------------------


def run_base_image(args: argparse.Namespace) -> int:
    """``archwheel base-image``: make (or find) the base image builds run on and print its tag and
    id."""
    request = BaseImageRequest(
        engine=args.engine,
        suite=args.suite,
        mirror=args.mirror,
        force=args.force,
        settings=environment_settings(),
        allow_expired_release=args.allow_expired_release,
    )
    image = make_base_image(request, echo=echo_to(Console(stderr=True, highlight=False)))
    print_base_image(image, args.format)
    return 0
