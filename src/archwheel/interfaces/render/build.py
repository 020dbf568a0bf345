"""The text of ``archwheel build`` and ``archwheel base-image``: the plan, the live progress line,
the stage headers, the CUDA compiles' progress (and, with ``--format json``, the event lines of
both), the result, the recipe list, the comparison with the official build, and
their JSON documents. ``ConsoleReporter`` is the build's reporter on a terminal."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from archwheel.interfaces.render.build_files import proof_lines
from archwheel.interfaces.render.common import dump_json, echo_to, literal, plain, safe
from archwheel.wheelbuild import (
    BaseImage,
    BuildOutput,
    BuildPlan,
    BuiltWheel,
    CompileProgress,
    ConfiguredBuild,
    ListedRecipe,
    OfficialComparison,
    RepairSpec,
)

BUILD_SCHEMA_VERSION = 1
EVENTS_SCHEMA_VERSION = 1  # interfaces/schema/build-events.schema.json

RECIPE_COLUMNS = ("name", "kind", "version", "cuda", "base_image", "default_arch")


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def progress(console: Console, quiet: bool) -> Any:
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


def event_line(event: str, **fields: object) -> str:
    """One event of ``build --format json`` on standard error: a JSON object on one line
    (interfaces/schema/build-events.schema.json)."""
    return json.dumps(
        {"schema_version": EVENTS_SCHEMA_VERSION, "event": event, **fields}, ensure_ascii=True
    )


def build_output(
    log: TextIO,
    console: Console,
    progress: Progress | None,
    *,
    quiet: bool,
    events: bool = False,
) -> BuildOutput:
    """The build's output: the log always; the stage headers and commands unless quiet; the
    CUDA compiles' progress on its own line unless quiet; with ``events`` (``--format
    json``) each stage and each progress report also as a JSON event line, quiet or not."""
    task: list[Any] = []

    printer = echo_to(console)

    def emit(event: str, **fields: object) -> None:
        console.print(event_line(event, **fields), markup=False, highlight=False, soft_wrap=True)

    def on_stage(name: str, description: str) -> None:
        if events:
            emit("stage", stage=name, description=description)
        if not quiet:
            console.print(
                f"[bold cyan]==[/] [bold]{safe(name)}[/]: {safe(description)}", highlight=False
            )
        if progress is None:
            return
        if task:
            progress.reset(task[0], total=None, description=name, steps="")
        else:
            task.append(progress.add_task(name, total=None, steps=""))

    def on_progress(stage: str, done: int, total: int) -> None:
        if progress is not None and task:
            progress.update(task[0], completed=done, total=total, steps=f"{done}/{total}")

    def on_compile_progress(report: CompileProgress) -> None:
        if events:
            emit("compile-progress", stage="compile", **report.to_json())
        if not quiet:
            console.print(literal(f"compile: {report.describe()}"), markup=False, highlight=False)
        if progress is not None and task:
            left = "" if report.left_s is None else f", ~{round(report.left_s)} s left"
            progress.update(task[0], completed=report.done, total=report.total,
                            steps=f"{report.done}/{report.total} .cu{left}")  # fmt: skip

    return BuildOutput(
        log,
        printer=None if quiet else printer,
        on_progress=on_progress,
        on_stage=on_stage,
        warner=lambda text: console.print(f"warning: {text}", markup=False, highlight=False),
        shown=literal,  # the saved log ends with why the build stopped, as the terminal does
        on_compile_progress=on_compile_progress,
    )


class ConsoleReporter:
    """The build's reporter on a terminal (``wheelbuild.BuildReporter``): host-side lines and
    the plan on ``console`` (standard error), the stages and the build output unless quiet,
    with one live progress line. ``plan_console``: where the plan goes instead (standard
    output for ``build --plan``, whose answer the plan is)."""

    def __init__(
        self,
        console: Console,
        *,
        quiet: bool,
        plan_console: Console | None = None,
        events: bool = False,
    ) -> None:
        self.console = console
        self.quiet = quiet
        self.plan_console = plan_console or console
        self.events = events  # --format json: stages and compile progress as JSON event lines

    @property
    def echo(self) -> Callable[[str], None] | None:
        """Where host-side lines go (downloads, git): the console, or None when quiet."""
        return None if self.quiet else echo_to(self.console)

    def planned(self, plan: BuildPlan, repair: RepairSpec | None) -> None:
        """Show the build plan (and the project's warnings and the repair step) before anything
        runs, so every log says what ran."""
        print_plan(self.plan_console, plan)
        for line in plan.project.warnings() if plan.project is not None else []:
            self.console.print(literal(f"warning: {line}"), markup=False, highlight=False)
        if repair is not None:
            self.plan_console.print(
                literal(f"repair: {repair.describe()}"), markup=False, highlight=False
            )

    @contextmanager
    def running(self, log: TextIO) -> Iterator[BuildOutput]:
        """The build's output while it runs: into ``log``, and on the console with a live progress
        line unless quiet."""
        with progress(self.console, self.quiet) as live:
            yield build_output(log, self.console, live, quiet=self.quiet, events=self.events)


def print_plan(console: Console, plan: BuildPlan) -> None:
    """Print a build plan as tables (what is built, the container environment, the phases and their
    steps): what ``build --plan`` answers."""
    table = Table(title="archwheel build plan", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in plan.summary_rows():
        table.add_row(label, safe(value))
    console.print(table)
    environment = Table(
        title="what the build command sees in its container",
        show_header=False,
        title_justify="left",
    )
    environment.add_column(style="bold")
    environment.add_column(overflow="fold")
    for label, value in plan.environment_rows():
        environment.add_row(safe(label), safe(value))
    console.print(environment)


def plan_json(plan: BuildPlan) -> dict[str, object]:
    """The build plan as the JSON document of ``build --plan --format json`` (the build schema)."""
    return {
        "schema_version": BUILD_SCHEMA_VERSION,
        "plan": dict(plan.summary_rows()),
        "environment": dict(plan.build_env),
        "container": dict(plan.environment_rows()[:2]),
        "source_check": [value for label, value in plan.source_check if label == "source check"],
        # what the CMake files do with the arch list (wheelbuild/sources/cmake_project.py)
        "cmake": [
            {"kind": label, "line": value}
            for label, value in plan.source_check
            if label in ("cmake", "arch variable")
        ],
        "parallel": plan.parallel.to_json() if plan.parallel is not None else None,
        "project": plan.project.to_json_dict() if plan.project is not None else None,
        "fatbins": (
            {"flags": plan.compression.flags, "why": plan.compression.why}
            if plan.compression is not None
            else None
        ),
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


def print_plan_json(out: Console, plan: BuildPlan) -> None:
    """Print ``plan_json`` of ``plan`` on ``out``: ``build --plan --format json``."""
    out.print_json(json.dumps(plan_json(plan)))


def print_result(
    *,
    out: Console,
    result: BuiltWheel,
    log_path: Path,
    fmt: str,
) -> None:
    """Print a finished build: the wheel, its hash, provenance, log, audit verdict, timings and
    cache figures, as text or JSON (``fmt``)."""
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
    out.print(f"[bold green]built[/] {safe(result.wheel)}", highlight=False)
    out.print(f"  sha256      {result.sha256}", highlight=False)
    out.print(f"  provenance  {safe(result.provenance)}", highlight=False)
    out.print(f"  audit       {safe(result.verdict.summary)}", highlight=False)
    if result.comparison is not None:
        out.print(f"  reproducible {result.comparison.summary()}", highlight=False)
    total = result.timings.get("total", 0.0)
    compile_s = result.timings.get("compile", 0.0)
    out.print(f"  time        {total:.1f} s (compile phase {compile_s:.1f} s)", highlight=False)
    out.print(f"  log         {safe(log_path)}", highlight=False)
    if result.smoke_snippet is not None:
        out.print(
            f"  smoke test  archwheel smoke {result.wheel} --snippet {result.smoke_snippet}",
            highlight=False,
        )


def print_configured(
    out: Console, configured: ConfiguredBuild, log_path: Path | None, fmt: str
) -> None:
    """A build stopped after configure: each build file's proof (``archwheel build-files``'s
    lines, or its JSON documents), the log and the kept work folder."""
    if fmt == "json":
        dump_json(
            {
                "configured": [proof.to_json_dict() for proof in configured.proofs],
                "objects": [check.to_json_dict() for check in configured.objects],
                "ok": configured.ok,
                "repair_preview": configured.preview.to_json_dict() if configured.preview else None,
                "links": [entry.to_json_dict() for entry in configured.links],
                "host_libraries": list(configured.host_libraries),
                "unbuilt_cuda": list(configured.unbuilt.missing) if configured.unbuilt else [],
                "unbuilt_cuda_proposal": list(configured.unbuilt.proposal)
                if configured.unbuilt
                else [],
                "log": str(log_path) if log_path else None,
                "work_folder": str(configured.kept) if configured.kept else None,
            }
        )
        return
    for proof in configured.proofs:
        for line in proof_lines(proof):
            out.print(plain(line), soft_wrap=True)
    if configured.unbuilt is not None:
        out.print(plain(configured.unbuilt.line()), soft_wrap=True)
    linking = [entry for entry in configured.links if entry.system]
    if linking:
        host = configured.host_libraries
        out.print(
            plain(f"LINKS: {len(linking)} libraries of the build link system libraries from "
                  f"outside the tree and the toolkit; a wheel of it needs on the host "
                  f"({len(host)}, unless [repair] bundles them): {', '.join(host) or 'none'}"
                  + (f"; provided by [repair] requirements: {', '.join(configured.provided)}"
                     if configured.provided else "")),
            soft_wrap=True,
        )  # fmt: skip
    for check in configured.objects:
        said = "as its step says" if check.ok else f"expected {' '.join(check.expected)}"
        out.print(
            plain(f"object {safe(check.output)}: {' '.join(check.found) or 'no device code'} "
                  f"({said})"),
            soft_wrap=True,
        )  # fmt: skip
    if configured.partial:
        bad = [c for c in configured.objects if not c.ok]
        verdict = (
            "AUDITED: no CUDA object among what was built (no CUDA source in the targets)"
            if not configured.objects
            else f"AUDITED: {len(configured.objects)} objects, {len(bad)} unlike their steps"
        )
        out.print(plain(verdict), soft_wrap=True)
    if configured.preview is not None:
        where = configured.preview.wheel
        out.print(plain(f"REPAIRED (preview): {where if where else 'not kept (no --work-name)'}"),
                  soft_wrap=True)  # fmt: skip
        for line in configured.preview.lines():
            out.print(plain(line), soft_wrap=True)
    if log_path is not None:
        out.print(plain(f"log: {log_path}"), soft_wrap=True)
    if configured.kept is not None:
        out.print(plain(f"work folder: {configured.kept}"), soft_wrap=True)


def print_comparison(out: Console, comparison: OfficialComparison, fmt: str) -> None:
    """``build --compare-official``: each difference from the official build, and why."""
    if fmt == "json":
        out.print_json(data=comparison.to_json_dict())
        return
    for line in comparison.lines():
        out.print(literal(line), markup=False)


def print_recipes(out: Console, listed: Sequence[ListedRecipe], fmt: str) -> None:
    """``build --list-recipes``: one row per recipe (the keys of RECIPE_COLUMNS, and path)."""
    rows = [
        {
            "name": item.recipe.name,
            "kind": item.recipe.kind,
            "version": item.recipe.version,
            "cuda": str(item.recipe.toolchain.cuda or "from torch"),
            "base_image": item.recipe.toolchain.base_image,
            "default_arch": str(item.recipe.arch.default),
            "path": str(item.path),
        }
        for item in listed
    ]
    if fmt == "json":
        out.print_json(
            json.dumps({"schema_version": BUILD_SCHEMA_VERSION, "recipes": [dict(r) for r in rows]})
        )
        return
    table = Table(title="recipes")
    for column in RECIPE_COLUMNS:
        table.add_column(column)
    for row in rows:
        table.add_row(*(safe(row[c]) for c in RECIPE_COLUMNS))
    out.print(table)


def print_base_image(image: BaseImage, fmt: str) -> None:
    """Print the base image ``base-image`` made or found: its tag and id as a line, or JSON
    (``fmt``)."""
    if fmt == "json":
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
