"""``archwheel matrix`` and ``archwheel publish``: build matrices into a PEP 503 index.

``matrix`` reads a matrix (TOML and/or flags), prints the plan (``--plan`` stops there), builds
each missing cell with the matrix's cell builder (``matrix.build_cells``: the build use case,
quiet, each cell's result shown on standard error), and publishes each audited wheel into the
index.
``publish`` puts wheels built elsewhere into an index, through the same audit (docs/matrix.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from archwheel._version import __version__
from archwheel.effects import ENGINES
from archwheel.errors import UsageError
from archwheel.exit_codes import EXIT_OK, EXIT_VERDICT_FAILED
from archwheel.facts import ArchList
from archwheel.interfaces.commands.build import (
    add_farm_options,
    cache_url_option,
    farm_request_fields,
)
from archwheel.interfaces.commands.options import (
    check_folder,
    check_output,
    environment_settings,
    existing_folder,
    net_budget,
    path_argument,
    version_text,
    volume_name,
    whole_number,
    write_output,
)
from archwheel.interfaces.render.build import ConsoleReporter, print_result
from archwheel.interfaces.render.ci import to_yaml
from archwheel.interfaces.render.common import console, dump_json, echo_to, err_console
from archwheel.interfaces.render.html import index_renderer
from archwheel.interfaces.render.matrix import (
    print_cell,
    print_plan,
    print_publish,
    print_recheck,
    print_summary,
    print_variant_preview,
)
from archwheel.matrix import (
    DIST_TOKEN_FILE_ENV,
    DIST_TOKEN_SECRET,
    EXPORTS,
    MAX_MATRIX_CELLS,
    Action,
    BuildWheel,
    CellBuilder,
    ExportOptions,
    MatrixPlan,
    MatrixRequest,
    MatrixShow,
    MatrixSpec,
    PublishRequest,
    load_matrix,
    matrix,
    parse_exclusion,
    publish_wheels,
    recheck_published,
)
from archwheel.matrix import cell_builder as matrix_cell_builder
from archwheel.wheelbuild import (
    CACHE_URL_ENV,
    DEFAULT_CCACHE_VOLUME,
    BuildResult,
    build_wheel,
    check_jobs,
    dist_farm_option,
    parse_scheduler_url,
)

MATRIX_EPILOG = """\
examples:
  archwheel matrix matrix.toml --index /srv/wheels --plan        print the plan, build nothing
  archwheel matrix --recipe example --recipe libtorch-ops --torch 2.13.0 --torch 2.14.1 \\
      --index /srv/wheels
  archwheel publish dist/*.whl --index /srv/wheels --expect "8.0;9.0"

Serve INDEX/current with any static web server; `pip install --index-url
file:///INDEX/current/simple/ NAME` works without one. Each wheel is audited by archwheel before
it is published, beside its provenance and its audit JSON; a failed cell publishes nothing.

One index holds one arch list per recipe, torch and Python (a wheel's name does not carry it):
cells that differ only in their arch list are refused; give each arch list its own --index,
or publish them as wheel variants of one version with --variants (docs/variants.md).

  archwheel matrix --recheck --index /srv/wheels      which published wheels to rebuild for
                                                      the torch releases that appeared since

exit codes: 0 every cell passed (published, or skipped because the index has it),
2 bad matrix or options, 5 a cell failed to build or its wheel was refused (publish: 1);
--recheck: 0 nothing to rebuild, 1 some wheel must be rebuilt, 3 a check could not be made,
2 an --index that is no published index (a file, no current, a current whose tree is gone)
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``matrix`` and ``publish`` to the command line, with their flags, help and examples
    (``cli.build_parser`` calls each command module's ``register`` with its subparsers)."""
    p = sub.add_parser(
        "matrix",
        help="plan and build a matrix of wheels into a PEP 503 index",
        description=(
            "Build every cell of a matrix (recipes x torch x Python x arch lists, less "
            "exclusions) that the index does not already hold with the same inputs, and "
            "publish each audited wheel into a PEP 503 simple index with find-links pages "
            f"per torch+CUDA. A matrix may span at most {MAX_MATRIX_CELLS} cells (exit 2 above; "
            "docs/limits.md)."
        ),
        epilog=MATRIX_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "matrix", nargs="?", type=path_argument, metavar="MATRIX.toml", help="matrix file"
    )
    p.add_argument("--index", type=path_argument, required=True, help="the index folder")
    p.add_argument("--recipe", action="append", default=[], help="a recipe (replaces the file's)")
    p.add_argument(
        "--torch",
        action="append",
        default=[],
        type=version_text,
        metavar="VERSION",
        help="a torch to build against (recipes that pin torch; replaces their pin)",
    )
    p.add_argument("--python", action="append", default=[], type=version_text, metavar="X.Y")
    p.add_argument("--arch", action="append", default=[], metavar="ARCHS")
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="AXIS=V,...",
        help="leave out cells matching every pair, e.g. python=3.12,arch=8.0;9.0",
    )
    p.add_argument("--plan", action="store_true", help="print the plan and stop")
    p.add_argument(
        "--variants",
        action="store_true",
        help="publish cells that differ only in their arch list as wheel variants of one "
        "version (PEP 825 draft; docs/variants.md)",
    )
    p.add_argument(
        "--default-arch",
        metavar="ARCHS",
        help="with --variants: the arch list whose cell is published as the plain (non-variant) "
        "wheel, for installers without variant support (added to the arch axis)",
    )
    p.add_argument(
        "--recheck",
        action="store_true",
        help="build nothing: run can-load of every published wheel built against torch against "
        "the torch releases on the index newer than those it was checked against, and list the "
        "wheels that must be rebuilt (exit 1; docs/matrix.md)",
    )
    p.add_argument(
        "--work",
        type=path_argument,
        default=Path("dist/matrix"),
        help="cell build folders (dist/matrix)",
    )
    p.add_argument("--engine", choices=ENGINES, default="docker")
    p.add_argument("--jobs", type=whole_number, help="compile jobs per cell")
    p.add_argument("--no-cache", action="store_true", help="compile without the compiler cache")
    p.add_argument(
        "--cache-volume",
        dest="ccache_volume",
        metavar="VOLUME",
        type=volume_name,
        default=DEFAULT_CCACHE_VOLUME,
        help=f"named volume of the local compiler cache (sccache's local storage; "
        f"{DEFAULT_CCACHE_VOLUME}); --ccache-volume is its old spelling",
    )
    # the spelling of the ccache days, kept as an alias (docs/commands.md), out of --help
    p.add_argument(
        "--ccache-volume", dest="ccache_volume", type=volume_name, help=argparse.SUPPRESS
    )
    p.add_argument(
        "--cache-url",
        default=None,
        metavar="URL",
        help="remote compiler cache on a Redis server, passed to every cell's build "
        f"(archwheel build --cache-url; default ${CACHE_URL_ENV})",
    )
    add_farm_options(p)
    p.add_argument("--format", choices=("text", "json"), default="text")
    ci = p.add_argument_group("CI export (builds nothing)")
    ci.add_argument(
        "--export",
        choices=EXPORTS,
        help="write a workflow: one job per cell to build, then a job merging them",
    )
    ci.add_argument("-o", "--output", type=path_argument, metavar="FILE", help="write it to FILE")
    ci.add_argument("--runner", metavar="LABEL", help="GitHub runs-on label / GitLab runner tag")
    ci.add_argument(
        "--install",
        default=f"archwheel=={__version__}",
        metavar="SPEC",
        help="what the jobs pip install (default: this archwheel's version)",
    )
    p.set_defaults(func=run)

    q = sub.add_parser(
        "publish",
        help="audit wheels and publish them into a PEP 503 index",
        description=(
            "Audit each wheel with archwheel's audit and publish those that pass into the "
            "index in one atomic step (with <wheel>.provenance.json when it lies beside)."
        ),
    )
    q.add_argument("wheels", nargs="*", type=path_argument, metavar="WHEEL")
    q.add_argument(
        "--from-index",
        action="append",
        default=[],
        type=path_argument,
        metavar="DIR",
        help="also publish every wheel of the archwheel index trees under DIR (CI artifacts), "
        "with what their manifests say; each is audited again",
    )
    q.add_argument("--index", type=path_argument, required=True, help="the index folder")
    q.add_argument("--expect", metavar="ARCHS", help="the arch list the wheels must hold")
    q.add_argument(
        "--torch", type=version_text, metavar="VERSION", help="the torch they were built against"
    )
    q.add_argument("--cuda", type=version_text, metavar="X.Y", help="the CUDA they were built with")
    q.add_argument(
        "--variants",
        action="store_true",
        help="publish each wheel as a wheel variant, its properties proven by its audit "
        "(PEP 825 draft; docs/variants.md)",
    )
    q.add_argument(
        "--default",
        action="append",
        default=[],
        type=path_argument,
        metavar="WHEEL",
        help="with --variants: also publish WHEEL plain, for installers without variant support",
    )
    q.add_argument("--format", choices=("text", "json"), default="text")
    q.set_defaults(func=run_publish)


@dataclass(frozen=True)
class MatrixCommand:
    """``archwheel matrix``, parsed: the matrix use case's request, and how to show its
    outcome (``format``; ``output``: the file an exported workflow goes to)."""

    request: MatrixRequest
    format: str = "text"
    output: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MatrixCommand:
        """The command of parsed ``args``: the matrix file read and overridden by the axis
        flags, exclusions and jobs checked, the cache URL resolved (bad flags: exit 2)."""
        spec = load_matrix(args.matrix) if args.matrix else MatrixSpec(recipes=())
        spec = spec.override(
            recipes=args.recipe, torch=args.torch, python=args.python, arch=args.arch
        )
        if args.default_arch is not None and not args.variants:
            raise UsageError("--default-arch applies to --variants", hint="add --variants")
        default_arch = str(ArchList.parse(args.default_arch)) if args.default_arch else None
        if default_arch is not None:
            arch_axis = spec.arch or tuple(args.arch)
            if arch_axis and default_arch not in {str(ArchList.parse(a)) for a in arch_axis}:
                spec = spec.override(arch=[*arch_axis, default_arch])
        extra = tuple(parse_exclusion(e) for e in args.exclude)
        spec = MatrixSpec(spec.recipes, spec.torch, spec.python, spec.arch, spec.exclude + extra)
        check_jobs(args.jobs)
        settings = environment_settings()
        cache_url = cache_url_option(
            settings.cache_url if args.cache_url is None else args.cache_url,
            no_cache=args.no_cache,
        )
        farm = farm_request_fields(args, settings)
        if args.export:  # the token file is the CI's (a secret), not this machine's
            if farm["dist_scheduler"]:
                farm["dist_scheduler"] = parse_scheduler_url(farm["dist_scheduler"])
        else:  # checked once here, not in every cell
            dist_farm_option(
                farm["dist_scheduler"], farm["dist_token_file"], required=farm["dist_required"]
            )
        request = MatrixRequest(
            **farm,
            variants=args.variants,
            default_arch=default_arch,
            settings=settings,
            cache_url=cache_url,
            ccache_volume=args.ccache_volume,
            spec=spec,
            index=args.index,
            plan_only=args.plan,
            work=args.work,
            engine=args.engine,
            jobs=args.jobs,
            cache=not args.no_cache,
            export=args.export,
            export_options=ExportOptions(
                runner=args.runner,
                install=args.install,
                engine=args.engine,
                jobs=args.jobs,
                cache=not args.no_cache,
                work=str(args.work),
                # A password never goes into an exported workflow (it is committed, and shown
                # to everyone who reads the repository): the jobs read it from a secret.
                cache_url=cache_url.text if cache_url and not cache_url.has_password else None,
                cache_url_secret=CACHE_URL_ENV if cache_url and cache_url.has_password else None,
                # the farm's token: by its secret's name (export.DIST_TOKEN_SECRET), never read
                dist_scheduler=farm["dist_scheduler"],
                dist_required=farm["dist_required"],
            ),
        )
        return cls(request, format=args.format, output=args.output)


def cell_builder(
    request: MatrixRequest, build: BuildWheel = build_wheel, *, shown: Console | None = None
) -> CellBuilder:
    """The matrix's cell builder with ``request``'s build options, quiet, each cell's plan and
    result on ``shown`` (standard error: the matrix owns standard output); ``build``: the build
    use case, or a test's stand-in."""
    err = shown or _cells_console()
    return matrix_cell_builder(
        request, ConsoleReporter(err, quiet=True), on_built=_result_printer(err), build=build
    )


def _cells_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _result_printer(err: Console) -> Callable[[BuildResult], None]:
    def show(result: BuildResult) -> None:
        assert result.built is not None and result.log is not None  # a finished build
        print_result(out=err, result=result.built, log_path=result.log, fmt="text")

    return show


def run(args: argparse.Namespace) -> int:
    """``archwheel matrix``: the recheck, or the matrix the flags describe."""
    if args.recheck:
        return run_recheck(args)
    return run_request(MatrixCommand.from_args(args), builder=None)


def run_recheck(args: argparse.Namespace) -> int:
    """``matrix --recheck``: the published wheels against the torch releases that appeared."""
    given = [
        flag
        for flag, value in (
            ("MATRIX.toml", args.matrix), ("--recipe", args.recipe), ("--torch", args.torch),
            ("--python", args.python), ("--arch", args.arch), ("--plan", args.plan),
            ("--export", args.export),
        )
        if value
    ]  # fmt: skip
    if given:
        raise UsageError(
            f"--recheck reads the index only: {', '.join(given)} does not apply",
            hint="archwheel matrix --recheck --index DIR",
        )
    settings = environment_settings()
    budget = net_budget(settings)  # a limit that is not one: refused before anything is read
    existing_folder("--index", args.index, "the index to recheck")
    report = recheck_published(
        args.index, settings=settings, budget=budget, on_event=echo_to(err_console())
    )
    if args.format == "json":
        dump_json(report.to_json_dict())
    else:
        print_recheck(console(), report)
    return report.exit_code


def run_request(command: MatrixCommand, builder: CellBuilder | None) -> int:
    """Check the folders, run the matrix use case with ``builder`` (None: the build use case)
    and print its outcome: the plan, the exported workflow, or every cell's verdict."""
    request = command.request
    if command.output is not None:
        check_output(command.output)  # before the recipes are read
    if request.export is None:
        check_folder(request.index)  # a plan naming an index that cannot work is refused
        check_folder(request.work)
    err, cells = err_console(), _cells_console()
    show = MatrixShow(
        planned=lambda plan: print_plan(err, plan),
        cell=lambda c: print_cell(err, c),
        reporter=ConsoleReporter(cells, quiet=True),
        built=_result_printer(cells),
    )
    outcome = matrix(request, builder=builder, show=show, landing=index_renderer())
    if outcome.workflow is not None:
        _export(command, outcome.plan, outcome.workflow)
    elif outcome.result is None:
        _print_plan(command, outcome.plan, outcome.preview)
    elif command.format == "json":
        dump_json(outcome.result.to_json_dict())
    else:
        print_summary(console(), outcome.result)
    return EXIT_OK if outcome.result is None else outcome.result.exit_code


def _print_plan(
    command: MatrixCommand, plan: MatrixPlan, preview: list[dict[str, Any]] | None
) -> None:
    if command.format == "json":
        document = plan.to_json_dict()
        if preview is not None:
            document["variants"] = preview
        dump_json(document)
    else:
        print_plan(console(), plan)
        if preview is not None:
            print_variant_preview(console(), preview)


def _export(command: MatrixCommand, plan: MatrixPlan, document: dict[str, Any]) -> None:
    kind = command.request.export
    header = (
        f"Written by `archwheel matrix --export {kind}` (archwheel {__version__}):\n"
        f"{len(plan.of(Action.BUILD))} cells to build; the index held "
        f"{len(plan.of(Action.SKIP))} already. Each job runs the one-cell archwheel matrix\n"
        "command; the publish job audits and merges their indexes (docs/matrix.md)."
    )
    if command.request.export_options.dist_scheduler:
        header += (
            f"\nThe compile farm's token is never written here: GitHub jobs read the secret "
            f"{DIST_TOKEN_SECRET};\nGitLab jobs a File-type CI/CD variable "
            f"{DIST_TOKEN_FILE_ENV} (its value: the token)."
        )
    secret = command.request.export_options.cache_url_secret
    if secret:
        header += (
            f"\nThe cache URL holds a password, so it is not written here: set {secret}\n"
            "in the CI's secret store (GitHub: a repository secret; GitLab: a masked CI/CD "
            "variable)."
        )
    text = to_yaml(document, header=header)
    if command.output is not None:
        write_output(command.output, text)
    else:
        sys.stdout.write(text)


def run_publish(args: argparse.Namespace) -> int:
    """``archwheel publish``: audit the wheels given and publish those that pass."""
    if not args.wheels and not args.from_index:
        raise UsageError("nothing to publish", hint="give wheels, or --from-index DIR")
    check_folder(args.index)
    expect = ArchList.parse(args.expect) if args.expect else None
    if args.default and not args.variants:
        raise UsageError("--default applies to --variants", hint="add --variants")
    request = PublishRequest(
        index=args.index,
        wheels=tuple(args.wheels),
        from_index=tuple(args.from_index),
        expect=expect,
        torch=args.torch,
        cuda=args.cuda,
        variants=args.variants,
        defaults=tuple(args.default),
    )
    result = publish_wheels(request, landing=index_renderer())
    document: dict[str, Any] = result.to_json_dict()
    if args.format == "json":
        dump_json(document)
    else:
        print_publish(console(), result)
    return int(EXIT_OK if result.ok else EXIT_VERDICT_FAILED)
