"""``archwheel build`` and ``archwheel base-image``: reproducible wheel builds in containers.

``build`` validates the recipe and the arch list against the recipe's toolkit before anything
starts, resolves the source, prints the plan, builds in containers, and lets the wheel out only
after the audit gate (docs/builds.md). ``base-image`` makes the Debian base image locally.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from archwheel.build.baseimage import DEFAULT_SUITE, MIRROR_ENV, ensure_base_image
from archwheel.build.index_sdist import locate_sdist
from archwheel.build.jobs import choose_jobs, detect_host_resources
from archwheel.build.plan import (
    DEFAULT_CCACHE_SIZE,
    DEFAULT_CCACHE_VOLUME,
    BuildOptions,
    BuildPlan,
    build_user,
    make_plan,
)
from archwheel.build.recipe import Recipe, find_recipe, load_recipe, recipe_files
from archwheel.build.runner import BuildOutput, BuildResult, BuildRunner
from archwheel.build.source import resolve_source
from archwheel.build.toolkit import prepare_torch
from archwheel.effects.engine import ENGINES, ContainerEngine, EngineSettings, sigterm_as_exit
from archwheel.effects.paths import cache_dir, docker_dir, recipe_dirs
from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import ArchListError, ArchwheelError, UsageError
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import load_facts

BUILD_SCHEMA_VERSION = 1

BUILD_EPILOG = """\
examples:
  archwheel build --recipe example --arch "8.0;9.0"          the example extension, two archs
  archwheel build --arch "9.0;12.0+PTX" --python 3.12        the newest PyTorch recipe
  archwheel build --recipe example --check-reproducible      build twice, compare the bytes
  archwheel build --recipe example --plan                    print the plan, build nothing
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
    parser.add_argument("--python", help="Python version X.Y (default: the recipe's first)")
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
        default=DEFAULT_CCACHE_VOLUME,
        help=f"named volume of the compiler cache ({DEFAULT_CCACHE_VOLUME})",
    )
    cache.add_argument("--ccache-size", default=DEFAULT_CCACHE_SIZE, help="ccache max size")
    cache.add_argument("--no-cache", action="store_true", help="compile without the cache")
    pip = parser.add_argument_group(
        "pip inside the container (default: this host's pip configuration)"
    )
    pip.add_argument("--ca-bundle", help="CA bundle (PEM) for pip, or 'none'")
    pip.add_argument("--index-url", help="replace the package index")
    pip.add_argument("--extra-index-url", action="append", default=[], help="add an index")
    pip.add_argument("--find-links", action="append", default=[], help="add a wheel folder/URL")
    pip.add_argument(
        "--no-host-pip-config", action="store_true", help="ignore this host's pip configuration"
    )
    parser.add_argument("--plan", action="store_true", help="print the plan and stop")
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


# -- archwheel build ----------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    facts = load_facts()
    if args.list_recipes:
        return _list_recipes(out, args.format)

    # 1. Everything that can be wrong with the request fails here, before any container.
    recipe = find_recipe(args.recipe, recipe_dirs(), facts)
    python = args.python or recipe.default_python
    if python not in recipe.python_versions:
        raise UsageError(
            f"recipe {recipe.name} does not support Python {python}",
            hint=f"supported: {', '.join(recipe.python_versions)}",
        )
    arch_list = checked_arch_list(recipe, args.arch)
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    settings = EngineSettings.create(args.engine, config_dir=cache_dir())
    pip = _pip_settings(args)
    jobs = choose_jobs(detect_host_resources(), recipe.build.memory_per_job_gib, args.jobs)
    options = BuildOptions(
        arch=args.arch,
        python=python,
        jobs=args.jobs,
        out=args.out.resolve(),
        engine=settings.name,
        check_reproducible=args.check_reproducible,
        ccache_volume=None if args.no_cache else args.ccache_volume,
        ccache_size=args.ccache_size,
    )

    # 2. The source (host-side git or download; still no container), then the plan.
    echo = err.print if not args.quiet else None
    line_echo = (lambda line: err.print(line, markup=False)) if echo else None
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
        echo=(lambda line: err.print(line, markup=False)) if echo else None,
    )
    plan = make_plan(
        recipe, arch_list, options, source, jobs=jobs, pip=pip, user=build_user(), torch=torch
    )
    _print_plan(err, plan)
    if args.plan:
        if args.format == "json":
            out.print_json(json.dumps(plan_json(plan)))
        return 0

    # 3. Build.
    logs = options.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    log_path = logs / f"{recipe.name}-{stamp}.log"
    with log_path.open("w") as log, _progress(err, args.quiet) as progress:
        for label, value in plan.summary_rows():
            log.write(f"# {label}: {value}\n")
        output = _output(log, err, progress, quiet=args.quiet)
        engine = ContainerEngine(settings, echo=output.echo)
        runner = BuildRunner(
            plan, engine, output, docker_dir=docker_dir(), keep_work=args.keep_work
        )
        with sigterm_as_exit():
            try:
                result = runner.run()
            except ArchwheelError as exc:
                # The saved log ends with why the build stopped, as the terminal does.
                log.write(f"archwheel: error: {exc.one_line()}\n")
                raise
    _print_result(out=out, err=err, result=result, log_path=log_path, fmt=args.format, plan=plan)
    return 0


def checked_arch_list(recipe: Recipe, text: str | None) -> ArchList:
    """Parse the requested arch list and check it against the recipe's toolkit and format."""
    facts = load_facts()
    arch_list = ArchList.parse(text, facts) if text else recipe.arch.default
    toolkit = facts.toolkit(recipe.toolchain.cuda)
    problems = arch_list.problems_with(toolkit, facts)
    if problems:
        raise ArchListError(
            "; ".join(problems) + f" (recipe {recipe.name} uses CUDA {recipe.toolchain.cuda})",
            hint=f"pick archs CUDA {recipe.toolchain.cuda} can target, or a recipe of another "
            "CUDA version; `archwheel arch LIST --cuda X.Y` checks a list",
        )
    try:
        recipe.arch.render(arch_list)
    except ArchListError as exc:
        raise ArchListError(
            f"recipe {recipe.name} passes the arch list as {recipe.arch.variable}: {exc.message}",
            hint=exc.hint,
        ) from None
    return arch_list


def _pip_settings(args: argparse.Namespace) -> PipSettings:
    base = PipSettings() if args.no_host_pip_config else PipSettings.from_host()
    ca: Path | None = None
    if args.ca_bundle and args.ca_bundle.lower() != "none":
        ca = Path(args.ca_bundle)
    settings = base.override(
        index_url=args.index_url,
        extra_index_urls=args.extra_index_url,
        find_links=args.find_links,
        ca_bundle=ca,
    )
    if args.ca_bundle and args.ca_bundle.lower() == "none":
        settings = PipSettings(
            settings.index_url, settings.extra_index_urls, settings.find_links,
            settings.trusted_hosts, None,
        )  # fmt: skip
    return settings.validated()


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(console: Console, quiet: bool) -> Any:
    """One live line on a terminal: the current step, its [i/N] count and its elapsed time."""
    if not console.is_terminal:
        return _NoProgress()
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[steps]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _output(log: Any, console: Console, progress: Progress | None, *, quiet: bool) -> BuildOutput:
    task: list[Any] = []

    def printer(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    def on_stage(name: str, description: str) -> None:
        if not quiet:
            console.print(f"[bold cyan]==[/] [bold]{name}[/]: {description}", highlight=False)
        if progress is None:
            return
        if task:
            progress.reset(task[0], total=None, description=name, steps="")
        else:
            task.append(progress.add_task(name, total=None, steps=""))

    def on_progress(stage: str, done: int, total: int) -> None:
        if progress is not None and task:
            progress.update(task[0], completed=done, total=total, steps=f"{done}/{total}")

    return BuildOutput(
        log,
        printer=None if quiet else printer,
        on_progress=on_progress,
        on_stage=on_stage,
    )


def _print_plan(console: Console, plan: BuildPlan) -> None:
    table = Table(title="archwheel build plan", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in plan.summary_rows():
        table.add_row(label, escape(value))  # recipe text: [build_ext], cuda-toolkit[...]
    console.print(table)


def plan_json(plan: BuildPlan) -> dict[str, object]:
    return {
        "schema_version": BUILD_SCHEMA_VERSION,
        "plan": dict(plan.summary_rows()),
        "environment": dict(plan.build_env),
        "phases": [
            {
                "name": phase.name,
                "network": phase.network,
                "steps": [
                    {"name": s.name, "user": s.user, "command": s.shell()} for s in phase.steps
                ],
            }
            for phase in plan.phases
        ],
    }


def _print_result(
    *,
    out: Console,
    err: Console,
    result: BuildResult,
    log_path: Path,
    fmt: str,
    plan: BuildPlan,
) -> None:
    if fmt == "json":
        document = {
            "schema_version": BUILD_SCHEMA_VERSION,
            "wheel": str(result.wheel),
            "sha256": result.sha256,
            "provenance": str(result.provenance),
            "log": str(log_path),
            "audit": {"ok": result.verdict.ok, "summary": result.verdict.summary},
            "timings_s": {k: round(v, 3) for k, v in result.timings.items()},
            "compiler_cache": dict(result.cache_stats),
            "reproducible": result.comparison.identical if result.comparison else None,
        }
        out.print_json(json.dumps(document))
        return
    out.print(f"[bold green]built[/] {result.wheel}", highlight=False)
    out.print(f"  sha256      {result.sha256}", highlight=False)
    out.print(f"  provenance  {result.provenance}", highlight=False)
    out.print(f"  audit       {result.verdict.summary}", highlight=False)
    if result.comparison is not None:
        out.print(f"  reproducible {result.comparison.summary()}", highlight=False)
    total = result.timings.get("total", 0.0)
    compile_s = result.timings.get("compile", 0.0)
    out.print(f"  time        {total:.1f} s (compile phase {compile_s:.1f} s)", highlight=False)
    out.print(f"  log         {log_path}", highlight=False)
    if result.smoke_snippet is not None:
        out.print(
            f"  smoke test  archwheel smoke {result.wheel} --snippet {result.smoke_snippet}",
            highlight=False,
        )


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
                "cuda": str(recipe.toolchain.cuda),
                "base_image": recipe.toolchain.base_image,
                "default_arch": str(recipe.arch.default),
                "path": str(path),
            }
        )
    if fmt == "json":
        out.print_json(json.dumps({"schema_version": BUILD_SCHEMA_VERSION, "recipes": rows}))
        return 0
    table = Table(title="recipes")
    for column in ("name", "kind", "version", "cuda", "base_image", "default_arch"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            *(
                str(row[c])
                for c in ("name", "kind", "version", "cuda", "base_image", "default_arch")
            )
        )
    out.print(table)
    return 0


# -- archwheel base-image -----------------------------------------------------------------------


def run_base_image(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False)
    settings = EngineSettings.create(args.engine, config_dir=cache_dir())
    engine = ContainerEngine(settings, echo=lambda line: err.print(line, markup=False))
    with sigterm_as_exit():
        image = ensure_base_image(
            engine,
            suite=args.suite,
            mirror=args.mirror,
            force=args.force,
            sink=lambda line: err.print(line, markup=False),
        )
    if args.format == "json":
        Console().print_json(
            json.dumps(
                {
                    "schema_version": BUILD_SCHEMA_VERSION,
                    "tag": image.tag,
                    "image_id": image.image_id,
                    "created": image.created,
                }
            )
        )
    else:
        verb = "made" if image.created else "exists"
        print(f"{image.tag} {verb}: {image.image_id}")
    return 0
