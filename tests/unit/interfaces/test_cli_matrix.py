"""`archwheel matrix` and `archwheel publish` end to end (the shipped example recipe; the
cells are built by the fake builder through the same wiring the real build uses)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from types import MappingProxyType

import jsonschema
import pytest
from rich.console import Console

from archwheel.errors import InputError
from archwheel.interfaces.cli import build_parser
from archwheel.interfaces.commands.matrix import MatrixCommand, cell_builder, run_request
from archwheel.matrix import Cell, Verdict, make_plan, read_index, read_recipes, run_matrix
from archwheel.wheelbuild import (
    BuildReporter,
    BuildRequest,
    BuildResult,
    BuiltWheel,
    build_wheel,
    provenance_path,
)
from archwheel.wheelbuild.wheel.gate import GateVerdict
from tests.support.cli import CliRun
from tests.support.index_wheels import device_library, make_dist
from tests.support.matrix_fakes import FakeCellBuilder
from tests.support.schemas import matrix_plan_schema, matrix_result_schema, publish_schema

# Two recipes with their default arch lists: example (8.0;9.0, no torch) and libtorch-ops (9.0,
# built against its torch 2.14.1).
ARGS = ("--recipe", "example", "--recipe", "libtorch-ops", "--python", "3.11")
TORCH_CELL = "libtorch-ops torch 2.14.1 py3.11 [9.0]"


def _request(index: Path, work: Path) -> MatrixCommand:
    """The request `archwheel matrix ARGS --index INDEX --work WORK --format json` makes."""
    argv = ["matrix", *ARGS, "--index", str(index), "--work", str(work), "--format", "json"]
    return MatrixCommand.from_args(build_parser("matrix").parse_args(argv))


def test_plan_builds_nothing_and_then_skips_what_the_index_has(
    cli_run: CliRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "index"
    code, out, _ = cli_run("matrix", *ARGS, "--index", str(index), "--plan", "--format", "json")
    assert code == 0
    plan = json.loads(out)
    jsonschema.validate(plan, matrix_plan_schema())
    assert [c["action"] for c in plan["cells"]] == ["build", "build"]
    assert not index.exists() or read_index(index) == ()

    builder = FakeCellBuilder(fail={TORCH_CELL})
    assert run_request(_request(index, tmp_path / "work"), builder) == 5
    capsys.readouterr()
    code, out, _ = cli_run("matrix", *ARGS, "--index", str(index), "--plan", "--format", "json")
    again = json.loads(out)
    jsonschema.validate(again, matrix_plan_schema())
    actions = {c["arch"]: c["action"] for c in again["cells"]}
    assert actions == {"8.0;9.0": "skip", "9.0": "build"}
    code, out, _ = cli_run("matrix", *ARGS, "--index", str(index), "--plan")
    assert code == 0 and "1 to build, 1 already in the index" in out


def test_matrix_summary_lists_every_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "index"
    builder = FakeCellBuilder(drop_arch={"example py3.11 [8.0;9.0]"})
    code = run_request(_request(index, tmp_path / "work"), builder)
    assert code == 5
    summary = json.loads(capsys.readouterr().out)
    jsonschema.validate(summary, matrix_result_schema())
    verdicts = {c["arch"]: c["verdict"] for c in summary["cells"]}
    assert verdicts == {"8.0;9.0": "refused", "9.0": "published"}
    assert summary["ok"] is False and summary["exit_code"] == 5


def test_a_torch_axis_makes_a_cell_per_torch_for_recipes_built_against_torch(
    cli_run: CliRun, tmp_path: Path
) -> None:
    code, out, err = cli_run("matrix", *ARGS, "--torch", "2.13.0", "--torch", "2.14.1",
                             "--index", str(tmp_path / "i"), "--plan", "--format", "json")  # fmt: skip
    assert code == 0, err
    cells = [(c["recipe"], c["torch"]) for c in json.loads(out)["cells"]]
    assert cells == [("example", None), ("libtorch-ops", "2.13.0"), ("libtorch-ops", "2.14.1")]
    # two arch lists of one recipe, torch and Python would make one file name: refused
    code, _, err = cli_run("matrix", "--recipe", "example", "--arch", "8.0", "--arch", "9.0",
                           "--index", str(tmp_path / "i"), "--work", str(tmp_path / "w"))  # fmt: skip
    assert code == 2 and "same wheel file name" in err and "index of its own" in err
    assert not (tmp_path / "w").exists()
    # a torch whose CUDA is not the recipe's is refused before any build
    code, _, err = cli_run("matrix", "--recipe", "libtorch-ops", "--torch", "2.14.1+cu128",
                           "--index", str(tmp_path / "i"), "--plan")  # fmt: skip
    assert code == 2 and "CUDA 12.8" in err


def test_bad_matrix_input_is_one_line(cli_run: CliRun, tmp_path: Path) -> None:
    code, _, err = cli_run("matrix", "--recipe", "nope", "--index", str(tmp_path / "i"), "--plan")
    assert code == 2 and "nope" in err and "Traceback" not in err
    code, _, err = cli_run("matrix", "--recipe", "example", "--exclude", "gpu=1",
                           "--index", str(tmp_path / "i"), "--plan")  # fmt: skip
    assert code == 2 and "AXIS=VALUE" in err


def test_publish_audits_and_says_what_it_refused(cli_run: CliRun, tmp_path: Path) -> None:
    good = make_dist(tmp_path / "w", "kern", "1.0+cu130", platform_tag="linux_x86_64",
                     requires=("torch==2.14.1",), libraries={"libk.so": device_library(80, 90)})  # fmt: skip
    bad = make_dist(tmp_path / "w", "kern", "1.1+cu130", platform_tag="linux_x86_64",
                    libraries={"libk.so": device_library(90)})  # fmt: skip
    index = tmp_path / "index"
    code, out, _ = cli_run("publish", str(good), str(bad), "--index", str(index),
                           "--expect", "8.0;9.0", "--format", "json")  # fmt: skip
    assert code == 1
    document = json.loads(out)
    jsonschema.validate(document, publish_schema())
    assert [e["file"] for e in document["published"]] == [good.name]
    assert document["refused"][0]["wheel"] == bad.name
    assert (index / "current" / "torch-2.14.1+cu130.html").exists()
    code, out, _ = cli_run("publish", str(good), "--index", str(index), "--expect", "8.0;9.0")
    assert code == 0 and "unchanged" in out


def test_the_real_build_wiring_reports_each_failed_cell(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`archwheel build` itself runs for each cell and fails before any container (its sdist
    does not match the recipe's sha256): every cell is reported, nothing is published."""
    example = (Path(__file__).resolve().parents[3] / "recipes" / "example.toml").read_text()
    source = tmp_path / "p"
    source.mkdir()
    (source / "README").write_text("x\n")
    import tarfile

    with tarfile.open(tmp_path / "proj-1.0.tar.gz", "w:gz") as tar:
        tar.add(source, arcname="p")
    recipe = example.replace('path = "../examples/cuda-kernels"',
                             f'sdist = "proj-1.0.tar.gz"\nsha256 = "{"0" * 64}"')  # fmt: skip
    recipe = recipe.replace('name = "example"', 'name = "badsum"')
    assert "badsum" in recipe and "sdist" in recipe
    (tmp_path / "badsum.toml").write_text(recipe)
    monkeypatch.setenv("ARCHWHEEL_RECIPES", str(tmp_path))
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    index = tmp_path / "index"
    (tmp_path / "badsum2.toml").write_text(recipe.replace('name = "badsum"', 'name = "badsum2"'))
    code, out, err = cli_run("matrix", "--recipe", "badsum", "--recipe", "badsum2",
                             "--index", str(index), "--work", str(tmp_path / "work"),
                             "--format", "json")  # fmt: skip
    assert code == 5, err
    result = json.loads(out)
    jsonschema.validate(result, matrix_result_schema())
    assert [c["verdict"] for c in result["cells"]] == ["build failed", "build failed"]
    assert all("sha256" in c["message"] for c in result["cells"])
    assert not index.exists()


def test_a_changed_source_rebuilds_its_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = (Path(__file__).resolve().parents[3] / "recipes" / "example.toml").read_text()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "kernel.cu").write_text("// one\n")
    recipe = example.replace('path = "../examples/cuda-kernels"', 'path = "src"')
    (tmp_path / "pathsrc.toml").write_text(recipe.replace('name = "example"', 'name = "pathsrc"'))
    monkeypatch.setenv("ARCHWHEEL_RECIPES", str(tmp_path))
    index = tmp_path / "index"
    argv = ["matrix", "--recipe", "pathsrc", "--index", str(index), "--work", str(tmp_path / "w"),
            "--format", "json"]  # fmt: skip

    def actions() -> list[str]:
        request = MatrixCommand.from_args(build_parser("matrix").parse_args([*argv, "--plan"]))
        run_request(request, None)
        return [c["action"] for c in json.loads(capsys.readouterr().out)["cells"]]

    request = MatrixCommand.from_args(build_parser("matrix").parse_args(argv))
    assert run_request(request, FakeCellBuilder()) == 0
    capsys.readouterr()
    assert actions() == ["skip"]
    (tmp_path / "src" / "kernel.cu").write_text("// two\n")
    assert actions() == ["build"]


def _build_result(out: Path) -> BuildResult:
    wheel = FakeCellBuilder()(Cell("example", None, "3.11", "8.0;9.0"), out).wheel
    provenance = provenance_path(wheel)
    provenance.write_text("{}")
    plan = build_wheel(BuildRequest(recipe="example", plan_only=True)).plan
    built = BuiltWheel(wheel, provenance, "0" * 64, GateVerdict(True, "ok"), MappingProxyType({}))
    return BuildResult(plan, None, built, out / "logs" / "cell.log")


def test_the_injected_build_use_case_builds_each_cell_without_redirecting_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The matrix gets ``build_wheel`` as its cell builder: the request is the cell's, standard
    output is never redirected (the build prints nothing itself), and the wheel and its
    provenance come from the BuildResult."""
    stdout = sys.stdout
    requests: list[BuildRequest] = []

    def build(request: BuildRequest, reporter: BuildReporter) -> BuildResult:
        assert sys.stdout is stdout
        assert reporter.echo is None  # quiet: the matrix shows each cell's plan and result
        requests.append(request)
        return _build_result(request.out)

    matrix = _request(tmp_path / "index", tmp_path / "work").request
    builder = cell_builder(matrix, build, shown=Console(file=io.StringIO()))
    made = builder(Cell("example", None, "3.11", "8.0;9.0"), tmp_path / "cell")
    assert made.wheel.parent == tmp_path / "cell"
    assert made.provenance == provenance_path(made.wheel)
    (request,) = requests
    assert (request.recipe, request.torch, request.python, request.arch) == (
        "example", None, "3.11", "8.0;9.0",
    )  # fmt: skip
    assert request.out == tmp_path / "cell" and not request.plan_only
    assert capsys.readouterr().out == ""


def test_a_cell_whose_build_raises_gets_the_errors_message(tmp_path: Path) -> None:
    def build(request: BuildRequest, reporter: BuildReporter) -> BuildResult:
        raise InputError(f"sdist of {request.recipe}: sha256 is not the recipe's", hint="pin")

    matrix = _request(tmp_path / "index", tmp_path / "work").request
    plan = make_plan(matrix.spec, read_recipes(matrix.spec, matrix.settings), ())
    builder = cell_builder(matrix, build, shown=Console(file=io.StringIO()))
    result = run_matrix(plan, builder, tmp_path / "index", tmp_path / "work")
    assert [c.verdict for c in result.cells] == [Verdict.BUILD_FAILED, Verdict.BUILD_FAILED]
    assert result.cells[0].message == "sdist of example: sha256 is not the recipe's (pin)"
    assert result.cells[1].message.startswith("sdist of libtorch-ops:")
