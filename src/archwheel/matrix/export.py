"""The plan as a CI workflow: one job per cell to build, and a final job that merges them.

Each cell's job runs exactly the command the local matrix would run for that cell alone
(``cell_argv``: ``archwheel matrix`` narrowed to the cell's recipe, torch, Python and arch list,
publishing into a job-local index ``cells/<key16>``), and keeps that index's trees as an
artifact. The final job runs ``archwheel publish --from-index cells --index wheel-index``: it
audits every wheel again before it enters the merged index (an artifact is never trusted
unaudited), and it runs even when some cells failed, so the cells that passed are published.
Cells the local index already holds are not exported: the plan skips them.

The documents are plain data (dicts and lists) for ``interfaces/render/ci.py`` to write as YAML.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from archwheel.matrix.plan import Action, Cell, MatrixPlan, PlannedCell

EXPORTS = ("github-actions", "gitlab-ci")
CELLS = "cells"
MERGED = "wheel-index"
DIST_TOKEN_SECRET = "ARCHWHEEL_DIST_TOKEN"  # noqa: S105 (the secret's name, not a secret)
DIST_TOKEN_FILE_ENV = "ARCHWHEEL_DIST_TOKEN_FILE"  # noqa: S105 (a setting's name)
_GITHUB_TOKEN_FILE = "${{ runner.temp }}/archwheel-dist-token"  # noqa: S105 (a path)


@dataclass(frozen=True)
class ExportOptions:
    """How the jobs run: where, how archwheel is installed, and the build flags that carry over."""

    runner: str | None = None  # GitHub runs-on label / GitLab runner tag
    install: str = "archwheel"  # what `pip install` gets
    engine: str = "docker"
    jobs: int | None = None
    cache: bool = True
    work: str = "dist/matrix"
    # --cache-url as given, when it holds no password: it is written into every cell's command
    cache_url: str | None = None
    # A cache URL with a password is never written into the workflow: the cell jobs read it
    # from this environment variable, set from the CI's secret store (GitHub: the secret of the
    # same name, mapped into the job; GitLab: a masked CI/CD variable, in every job's env).
    cache_url_secret: str | None = None
    # A compile farm: its scheduler's URL is written into every cell's command; its token
    # never is. GitHub: the jobs write the secret DIST_TOKEN_SECRET into a file of the
    # runner's temp folder and name it in $ARCHWHEEL_DIST_TOKEN_FILE; GitLab: a File-type
    # CI/CD variable named ARCHWHEEL_DIST_TOKEN_FILE is that file.
    dist_scheduler: str | None = None
    dist_required: bool = False


def cell_index(planned: PlannedCell) -> str:
    """The folder, relative to the job's checkout, where one exported cell job publishes its index
    (``cells/<key prefix>``): the merge job finds it there."""
    return f"{CELLS}/{planned.key[:16]}"


def cell_argv(cell: Cell, index: str, options: ExportOptions) -> list[str]:
    """The one-cell ``archwheel matrix`` command: what the local matrix runs for ``cell``."""
    argv = ["archwheel", "matrix", "--recipe", cell.recipe]
    if cell.torch:
        argv += ["--torch", cell.torch]
    argv += ["--python", cell.python, "--arch", cell.arch, "--index", index]
    argv += ["--work", options.work]
    if options.engine != "docker":
        argv += ["--engine", options.engine]
    if options.jobs is not None:
        argv += ["--jobs", str(options.jobs)]
    if not options.cache:
        argv.append("--no-cache")
    if options.cache_url:
        argv += ["--cache-url", options.cache_url]
    if options.dist_scheduler:
        argv += ["--dist-scheduler", options.dist_scheduler]
        if options.dist_required:
            argv.append("--dist-required")
    return argv


def _farm_token_steps(options: ExportOptions) -> list[dict[str, Any]]:
    """GitHub: the step writing the farm's token secret into a file only the job reads."""
    if not options.dist_scheduler:
        return []
    return [
        {
            "name": "write the compile farm's token to a file",
            "env": {
                DIST_TOKEN_SECRET: "${{ secrets." + DIST_TOKEN_SECRET + " }}",
                DIST_TOKEN_FILE_ENV: _GITHUB_TOKEN_FILE,
            },
            "run": (
                f'umask 077 && printf \'%s\\n\' "${DIST_TOKEN_SECRET}" > "${DIST_TOKEN_FILE_ENV}"'
            ),
        }
    ]


def merge_argv() -> list[str]:
    """The ``archwheel publish`` command of the exported merge job: audits the cell jobs' indexes
    again and merges them into one."""
    return ["archwheel", "publish", "--from-index", CELLS, "--index", MERGED]


def _job_id(planned: PlannedCell) -> str:
    return f"cell-{planned.key[:12]}"


def _install(options: ExportOptions) -> str:
    return f"python3 -m pip install {shlex.quote(options.install)}"


def _cells(plan: MatrixPlan) -> Sequence[PlannedCell]:
    return plan.of(Action.BUILD)


def github_actions(plan: MatrixPlan, options: ExportOptions) -> dict[str, Any]:
    """A GitHub Actions workflow of ``plan``: one job per cell to build, each keeping its index as
    an artifact, then a job that merges them."""
    runner = options.runner or "ubuntu-latest"
    jobs: dict[str, Any] = {}
    for planned in _cells(plan):
        index = cell_index(planned)
        job: dict[str, Any] = {"name": planned.cell.label, "runs-on": runner}
        if options.cache_url_secret:
            secret = options.cache_url_secret
            job["env"] = {secret: "${{ secrets." + secret + " }}"}
        jobs[_job_id(planned)] = job | {
            "steps": [
                {"uses": "actions/checkout@v5"},
                {"name": "install archwheel", "run": _install(options)},
                *_farm_token_steps(options),
                {
                    "name": "build, audit and publish the cell",
                    "run": shlex.join(cell_argv(planned.cell, index, options)),
                    **(
                        {"env": {DIST_TOKEN_FILE_ENV: _GITHUB_TOKEN_FILE}}
                        if options.dist_scheduler
                        else {}
                    ),
                },
                {
                    "name": "keep the cell's index",
                    "if": "${{ !cancelled() }}",
                    "uses": "actions/upload-artifact@v6",
                    "with": {
                        "name": _job_id(planned),
                        "path": f"{index}/trees/",
                        "if-no-files-found": "ignore",
                    },
                },
            ],
        }
    jobs["publish"] = {
        "name": "merge the cells into the index",
        "needs": [_job_id(p) for p in _cells(plan)],
        "if": "${{ !cancelled() }}",
        "runs-on": runner,
        "steps": [
            {"uses": "actions/checkout@v5"},
            {"name": "install archwheel", "run": _install(options)},
            {
                "uses": "actions/download-artifact@v7",
                "with": {"pattern": "cell-*", "path": CELLS},
            },
            {"name": "audit and merge", "run": shlex.join(merge_argv())},
            {
                "uses": "actions/upload-artifact@v6",
                "with": {"name": MERGED, "path": f"{MERGED}/"},
            },
        ],
    }
    return {
        "name": "archwheel matrix",
        "on": {"workflow_dispatch": {}},
        "permissions": {"contents": "read"},
        "jobs": jobs,
    }


def gitlab_ci(plan: MatrixPlan, options: ExportOptions) -> dict[str, Any]:
    """A GitLab CI pipeline of ``plan``: a build-stage job per cell to build, then a publish-stage
    job that merges their indexes."""
    document: dict[str, Any] = {"stages": ["build", "publish"]}
    tags = [options.runner] if options.runner else None
    for planned in _cells(plan):
        index = cell_index(planned)
        job: dict[str, Any] = {
            "stage": "build",
            "script": [_install(options), shlex.join(cell_argv(planned.cell, index, options))],
            "artifacts": {"paths": [f"{index}/trees/"], "when": "on_success"},
        }
        if tags:
            job["tags"] = tags
        document[_job_id(planned)] = job
    merge: dict[str, Any] = {
        "stage": "publish",
        "when": "always",
        "script": [_install(options), shlex.join(merge_argv())],
        "artifacts": {"paths": [f"{MERGED}/"]},
    }
    if tags:
        merge["tags"] = tags
    document["publish"] = merge
    return document


def export(plan: MatrixPlan, kind: str, options: ExportOptions) -> dict[str, Any]:
    """The workflow document of ``plan`` for ``kind`` (``github-actions`` or ``gitlab-ci``, as in
    ``EXPORTS``), ready to be written as YAML."""
    if kind == "github-actions":
        return github_actions(plan, options)
    if kind == "gitlab-ci":
        return gitlab_ci(plan, options)
    raise ValueError(kind)
