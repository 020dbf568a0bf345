"""`archwheel matrix --export github-actions|gitlab-ci`: the workflows pass actionlint and
check-jsonschema's vendored schemas, each job runs exactly the one-cell command of the local
plan (parsed back with archwheel's own parser, planned, and run), and the merge job's command
publishes what the cell jobs left."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from archwheel.interfaces.cli import build_parser
from archwheel.interfaces.commands.matrix import MatrixCommand, run_request
from archwheel.matrix.cells import read_recipes
from archwheel.matrix.export import DIST_TOKEN_FILE_ENV, DIST_TOKEN_SECRET
from archwheel.matrix.index import read_index
from archwheel.matrix.plan import Action, make_plan
from tests.support.cli import CliRun
from tests.support.components import require
from tests.support.index_wheels import extra_tool
from tests.support.matrix_fakes import FakeCellBuilder

# Three cells: the example (no torch) and libtorch-ops against two torch releases (one arch
# list each: two lists of one recipe would make one file name, which the plan refuses).
MATRIX = ("--recipe", "example", "--recipe", "libtorch-ops", "--python", "3.11",
          "--torch", "2.13.0", "--torch", "2.14.1")  # fmt: skip


def _yaml(path: Path) -> dict[str, Any]:
    try:
        from ruamel.yaml import YAML  # check-jsonschema's YAML reader (the test extra)
    except ImportError:
        require(False, "ruamel.yaml is not installed (pip install -e '.[test]')")
        raise
    loaded: dict[str, Any] = YAML(typ="safe").load(path.read_text())
    return loaded


def _commands(kind: str, document: dict[str, Any]) -> dict[str, list[str]]:
    """job id -> the archwheel command lines it runs."""
    found: dict[str, list[str]] = {}
    if kind == "github-actions":
        for job_id, job in document["jobs"].items():
            runs = [s["run"] for s in job["steps"] if "run" in s]
            found[job_id] = [r for r in runs if r.startswith("archwheel ")]
    else:
        for job_id, job in document.items():
            if isinstance(job, dict) and "script" in job:
                found[job_id] = [r for r in job["script"] if r.startswith("archwheel ")]
    return found


def _request(argv: list[str]) -> MatrixCommand:
    args = build_parser("matrix").parse_args(argv[1:])
    return MatrixCommand.from_args(args)


@pytest.fixture
def exported(cli_run: CliRun, tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """A local index holding one cell already, and both exports of the rest."""
    index = tmp_path / "index"
    first = _request(["archwheel", "matrix", "--recipe", "example", "--python", "3.11",
                      "--index", str(index), "--work", str(tmp_path / "w")])  # fmt: skip
    assert run_request(first, FakeCellBuilder()) == 0
    files = {}
    for kind in ("github-actions", "gitlab-ci"):
        files[kind] = tmp_path / f"{kind}.yml"
        code, _, err = cli_run("matrix", *MATRIX, "--index", str(index), "--export", kind,
                               "-o", str(files[kind]), "--runner", "self-hosted")  # fmt: skip
        assert code == 0, err
    return index, files


def test_the_exports_pass_actionlint_and_the_vendored_schemas(
    exported: tuple[Path, dict[str, Path]],
) -> None:
    _, files = exported
    lint = subprocess.run([extra_tool("actionlint"), str(files["github-actions"])],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr
    for kind, schema in (("github-actions", "vendor.github-workflows"),
                         ("gitlab-ci", "vendor.gitlab-ci")):  # fmt: skip
        proc = subprocess.run(
            [extra_tool("check-jsonschema"), "--builtin-schema", schema, str(files[kind])],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_broken_workflow_is_caught_by_the_checkers(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text('"on": push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n'
                   '      - run: echo ${{ matrix.nope }}\n')  # fmt: skip
    lint = subprocess.run([extra_tool("actionlint"), str(bad)], capture_output=True, check=False)
    assert lint.returncode != 0
    gitlab = tmp_path / "bad-gitlab.yml"
    gitlab.write_text("job:\n  stage: build\n  script: 3\n")
    proc = subprocess.run(
        [extra_tool("check-jsonschema"), "--builtin-schema", "vendor.gitlab-ci", str(gitlab)],
        capture_output=True, check=False,
    )  # fmt: skip
    assert proc.returncode != 0


def test_each_job_runs_exactly_the_local_plans_cell(
    exported: tuple[Path, dict[str, Path]],
) -> None:
    index, files = exported
    local = _request(["archwheel", "matrix", *MATRIX, "--index", str(index)]).request
    plan = make_plan(local.spec, read_recipes(local.spec, local.settings), read_index(index))
    to_build = {c.key: c for c in plan.of(Action.BUILD)}
    assert len(to_build) == 2 and len(plan.of(Action.SKIP)) == 1  # the example is not exported
    per_kind = {}
    for kind, path in files.items():
        commands = _commands(kind, _yaml(path))
        assert commands.pop("publish") == [
            "archwheel publish --from-index cells --index wheel-index"
        ]
        keys = {}
        for lines in commands.values():
            (line,) = lines
            job = _request(shlex.split(line)).request
            job_plan = make_plan(job.spec, read_recipes(job.spec, job.settings), ())
            (cell,) = job_plan.cells
            assert cell.action is Action.BUILD and cell.key in to_build
            assert cell.cell == to_build[cell.key].cell
            assert job.index == Path("cells") / cell.key[:16]
            keys[cell.key] = line
        assert set(keys) == set(to_build)
        per_kind[kind] = keys
    assert per_kind["github-actions"] == per_kind["gitlab-ci"]


def test_the_merge_job_publishes_what_the_cell_jobs_left(
    cli_run: CliRun, exported: tuple[Path, dict[str, Path]], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    index, files = exported
    runner = tmp_path / "runner"
    runner.mkdir()
    monkeypatch.chdir(runner)
    commands = _commands("github-actions", _yaml(files["github-actions"]))
    merge = commands.pop("publish")[0]
    for job_id, (line,) in commands.items():
        assert run_request(_request(shlex.split(line)), FakeCellBuilder()) == 0
        # what upload-artifact / download-artifact leave: cells/<artifact>/<tree id>/...
        key16 = shlex.split(line)[shlex.split(line).index("--index") + 1]
        shutil.copytree(runner / key16 / "trees", runner / "downloaded" / job_id)
        shutil.rmtree(runner / key16)
    (runner / "downloaded").rename(runner / "cells")
    code, out, err = cli_run(*shlex.split(merge)[1:])
    assert code == 0, out + err
    merged = read_index(runner / "wheel-index")
    assert len(merged) == 2 and all(e.cell_key for e in merged)
    local = _request(
        ["archwheel", "matrix", *MATRIX, "--index", str(runner / "wheel-index")]
    ).request
    plan = make_plan(local.spec, read_recipes(local.spec, local.settings), merged)
    assert [c.cell.recipe for c in plan.of(Action.BUILD)] == ["example"]  # built locally


def test_the_yaml_writer_round_trips_awkward_values(tmp_path: Path) -> None:
    from archwheel.interfaces.render.ci import to_yaml

    document = {
        "on": {"workflow_dispatch": {}},
        "yes": ["3.11", "3.10", "no", "null", "a: b", "#x", "${{ !cancelled() }}", "é\nz"],
        "n": {"nested": [{"k": 1, "flag": True}, [], "x"]},
        "key with space": "'quoted'",
        "key_ending_in_a_newline\n": "its '$' anchor let it through unquoted",
    }
    path = tmp_path / "x.yml"
    path.write_text(to_yaml(document, header="a header\n\nwith a blank line"))
    assert _yaml(path) == document


def test_merging_from_a_folder_without_an_index_is_one_line(
    cli_run: CliRun, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = cli_run("publish", "--from-index", str(tmp_path / "empty"),
                           "--index", str(tmp_path / "i"))  # fmt: skip
    assert code == 3 and "holds no archwheel index" in err
    code, _, err = cli_run("publish", "--index", str(tmp_path / "i"))
    assert code == 2 and "nothing to publish" in err


def test_the_cell_jobs_carry_the_shared_cache(cli_run: CliRun, tmp_path: Path) -> None:
    """`--cache-url` reaches every cell job's command, and that command parses back to it."""
    out = tmp_path / "gh.yml"
    url = "redis://cache.example:6379"
    code, _, err = cli_run("matrix", *MATRIX, "--index", str(tmp_path / "i"), "--export",
                           "github-actions", "-o", str(out), "--cache-url", url)  # fmt: skip
    assert code == 0, err
    cells = {k: v for k, v in _commands("github-actions", _yaml(out)).items() if k != "publish"}
    assert len(cells) == 3
    for (command,) in cells.values():
        request = _request(shlex.split(command)).request
        assert request.cache_url is not None and request.cache_url.text == url


def test_a_cache_password_is_never_written_into_a_workflow(cli_run: CliRun, tmp_path: Path) -> None:
    """A cache URL with a password: the committed workflow must not hold it. The GitHub cell
    jobs map the repository secret ARCHWHEEL_CACHE_URL into their environment (archwheel's
    default for --cache-url), GitLab's read the masked variable of that name; the files pass
    actionlint and the schemas."""
    url = "redis://builder:hunter2@cache.example:6379/1"
    for kind in ("github-actions", "gitlab-ci"):
        out = tmp_path / f"{kind}.yml"
        code, _, err = cli_run("matrix", *MATRIX, "--index", str(tmp_path / "i"), "--export",
                               kind, "-o", str(out), "--cache-url", url)  # fmt: skip
        assert code == 0, err
        text = out.read_text()
        assert "hunter2" not in text
        assert "set ARCHWHEEL_CACHE_URL" in text  # the header says where it must come from
        commands = _commands(kind, _yaml(out))
        assert all("--cache-url" not in c for lines in commands.values() for c in lines)
        schema = "vendor.github-workflows" if kind == "github-actions" else "vendor.gitlab-ci"
        proc = subprocess.run(
            [extra_tool("check-jsonschema"), "--builtin-schema", schema, str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
    document = _yaml(tmp_path / "github-actions.yml")
    cells = {k: v for k, v in document["jobs"].items() if k != "publish"}
    assert cells and all(
        job["env"] == {"ARCHWHEEL_CACHE_URL": "${{ secrets.ARCHWHEEL_CACHE_URL }}"}
        for job in cells.values()
    )
    lint = subprocess.run([extra_tool("actionlint"), str(tmp_path / "github-actions.yml")],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr


FARM_SECRET = "farm-SECRET-token-5678"


def test_an_exported_workflow_names_the_token_by_its_secret_only(
    cli_run: CliRun, tmp_path: Path
) -> None:
    """The workflow carries the scheduler in every cell command and the token by its secret's
    name: GitHub jobs write the secret to a file of the runner's temp folder; GitLab's read a
    File-type variable. The files pass the vendored schemas (and actionlint for GitHub)."""
    token = _farm_token(tmp_path)
    for kind in ("github-actions", "gitlab-ci"):
        out = tmp_path / f"{kind}.yml"
        code, _, err = cli_run(
            "matrix", *MATRIX, "--index", str(tmp_path / "i"), "--export", kind, "-o", str(out),
            "--dist-scheduler", "http://farm.example:10600", "--dist-token-file", str(token),
            "--dist-required",
        )  # fmt: skip
        assert code == 0, err
        text = out.read_text()
        assert FARM_SECRET not in text and str(token) not in text
        assert DIST_TOKEN_SECRET in text and DIST_TOKEN_FILE_ENV in text
        cells = {k: v for k, v in _commands(kind, _yaml(out)).items() if k != "publish"}
        assert len(cells) == 3
        for (command,) in cells.values():
            argv = shlex.split(command)
            assert "--dist-token-file" not in argv
            args = build_parser("matrix").parse_args(argv[1:])
            assert args.dist_scheduler == "http://farm.example:10600" and args.dist_required
        schema = "vendor.github-workflows" if kind == "github-actions" else "vendor.gitlab-ci"
        proc = subprocess.run(
            [extra_tool("check-jsonschema"), "--builtin-schema", schema, str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
    document = _yaml(tmp_path / "github-actions.yml")
    for job_id, job in document["jobs"].items():
        if job_id == "publish":
            continue
        write, build = job["steps"][2], job["steps"][3]
        assert write["env"][DIST_TOKEN_SECRET] == "${{ secrets." + DIST_TOKEN_SECRET + " }}"
        assert build["env"][DIST_TOKEN_FILE_ENV] == write["env"][DIST_TOKEN_FILE_ENV]
    lint = subprocess.run([extra_tool("actionlint"), str(tmp_path / "github-actions.yml")],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr


def _farm_token(tmp_path: Path) -> Path:
    path = tmp_path / "farm-token"
    path.write_text(FARM_SECRET + "\n")
    return path
