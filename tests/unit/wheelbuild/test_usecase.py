"""The build use case as a library call: ``build_wheel(BuildRequest(...)) -> BuildResult``.

A plan-only request returns the plan and prints nothing; a bad request raises the error the
command reports; a build writes its log (the plan first, the error last) through the reporter
it is given. The runner is replaced by a fake here: no container starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import TextIO

import pytest

from archwheel import wheelbuild
from archwheel.effects.settings import Settings
from archwheel.errors import ArchListError, BuildError, UsageError
from archwheel.wheelbuild import (
    BuildOutput,
    BuildPlan,
    BuildRequest,
    BuiltWheel,
    RepairSpec,
    build_wheel,
    list_recipes,
    summarize_recipes,
    usecase,
)
from archwheel.wheelbuild.wheel.gate import GateVerdict

EXAMPLE = BuildRequest(recipe="example", arch="8.0;9.0", plan_only=True)


class RecordingReporter:
    """A reporter that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.plans: list[tuple[BuildPlan, RepairSpec | None]] = []
        self.outputs: list[BuildOutput] = []

    @property
    def echo(self) -> usecase.LineSink | None:
        return self.lines.append

    def planned(self, plan: BuildPlan, repair: RepairSpec | None) -> None:
        self.plans.append((plan, repair))

    @contextmanager
    def running(self, log: TextIO) -> Iterator[BuildOutput]:
        output = BuildOutput(log, printer=self.lines.append)
        self.outputs.append(output)
        yield output


def test_a_plan_only_request_returns_the_plan_and_prints_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    reporter = RecordingReporter()
    result = build_wheel(
        BuildRequest(recipe="example", arch="9.0;8.0", out=tmp_path, plan_only=True), reporter
    )
    assert isinstance(result.plan, BuildPlan)
    assert result.built is None and result.log is None
    assert reporter.plans == [(result.plan, result.repair)]
    assert str(result.plan.arch_list) == "8.0;9.0"  # checked once, into the plan's shape
    assert result.plan.python == result.plan.recipe.default_python  # defaulted once
    assert result.plan.out_dir == tmp_path.resolve()
    assert not (tmp_path / "logs").exists()
    assert capsys.readouterr() == ("", "")
    # no reporter: nothing is shown either
    assert build_wheel(EXAMPLE).plan.arch_list == result.plan.arch_list
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"recipe": "no-such-recipe"}, UsageError, "no-such-recipe"),
        ({"python": "2.7"}, UsageError, "recipe example does not support Python 2.7"),
        ({"arch": "3.0"}, ArchListError, "3.0"),
        ({"jobs": 0}, UsageError, "--jobs must be at least 1 and at most 1024, not 0"),
        ({"git_mirrors": ("a=b",)}, UsageError, "--git-mirror: recipe example has no git source"),
    ],
)
def test_a_bad_request_raises_what_the_command_reports(
    change: dict[str, object], error: type[Exception], message: str
) -> None:
    fields = {"recipe": "example", "plan_only": True, **change}
    with pytest.raises(error) as info:
        build_wheel(BuildRequest(**fields))  # type: ignore[arg-type]
    assert message in str(info.value)


def _built(out: Path) -> BuiltWheel:
    wheel = out / "demo-1.0-py3-none-any.whl"
    return BuiltWheel(
        wheel=wheel,
        provenance=out / (wheel.name + ".provenance.json"),
        sha256="0" * 64,
        verdict=GateVerdict(ok=True, summary="fine"),
        timings=MappingProxyType({"total": 1.0}),
    )


class FakeRunner:
    """Stands in for ``BuildRunner``: says one line, then returns or raises."""

    fail: str | None = None

    def __init__(self, plan: BuildPlan, engine: object, output: BuildOutput, **_: object) -> None:
        self.plan = plan
        self.output = output

    def run(self) -> BuiltWheel:
        self.output.line("[1/2] compiling")
        if self.fail is not None:
            raise BuildError(self.fail, hint="look")
        return _built(self.plan.out_dir)


def test_a_build_writes_its_log_and_returns_the_wheel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(usecase, "BuildRunner", FakeRunner)
    reporter = RecordingReporter()
    request = BuildRequest(recipe="example", out=tmp_path)
    result = build_wheel(request, reporter)
    assert result.built == _built(tmp_path.resolve())
    assert result.log is not None and result.log.parent == tmp_path.resolve() / "logs"
    text = result.log.read_text()
    assert text.startswith(usecase.log_header(result.plan))
    assert text.endswith("[1/2] compiling\n")
    assert reporter.lines == ["[1/2] compiling"]


def test_a_failed_build_ends_its_log_with_the_error_and_raises_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(FakeRunner, "fail", "the compile failed")
    monkeypatch.setattr(usecase, "BuildRunner", FakeRunner)
    with pytest.raises(BuildError, match="the compile failed"):
        build_wheel(BuildRequest(recipe="example", out=tmp_path))
    (log,) = (tmp_path / "logs").iterdir()
    assert log.read_text().endswith("archwheel: error: the compile failed (look)\n")


def test_recipes_are_listed_and_summarized_for_a_matrix() -> None:
    settings = Settings.from_environ(os.environ)
    names = [item.recipe.name for item in list_recipes(settings)]
    assert "example" in names and "libtorch-ops" in names
    summary = summarize_recipes(["example"], settings, arch=["8.0", "9.0"])["example"]
    assert summary.default_arch == "8.0;9.0" and summary.torch is None
    assert summary.source_digest is not None and summary.source_digest.startswith("path:")
    with pytest.raises(ArchListError):
        summarize_recipes(["example"], settings, arch=["3.0"])  # a list its toolkit cannot build


def test_the_public_names_resolve_and_importing_the_floor_stays_cheap() -> None:
    for name in wheelbuild.__all__:
        assert getattr(wheelbuild, name) is not None, name
    submodules = {p.stem for p in Path(wheelbuild.__file__).parent.glob("*.py")}
    assert not submodules & set(wheelbuild.__all__)  # importing one would rebind the name
    code = (
        "import sys, archwheel.wheelbuild; "
        "print(sorted(m for m in sys.modules if m.startswith('archwheel.wheelbuild.')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "[]"


def test_a_torch_release_the_index_lacks_is_named_with_those_it_has(tmp_path: Path) -> None:
    from archwheel.effects.pipconfig import PipSettings
    from archwheel.errors import UsageError
    from archwheel.wheelbuild.usecase import check_torch_release

    page = tmp_path / "simple" / "torch"
    page.mkdir(parents=True)
    names = [
        f"torch-{v}-cp311-cp311-manylinux_2_28_x86_64.whl"
        for v in ("2.13.0", "2.13.0+cpu", "2.14.0", "2.14.1", "2.15.0")
    ]
    page.joinpath("index.html").write_text(
        "".join(f'<a href="../../files/{n}">{n}</a>\n' for n in names)
    )
    pip = PipSettings(index_url=(tmp_path / "simple").as_uri())
    check_torch_release("2.14.1", pip)  # on the index: nothing said
    with pytest.raises(UsageError) as caught:
        check_torch_release("2.14.9", pip)
    assert "torch 2.14.9 is not on the package index" in caught.value.message
    assert "2.15.0" in caught.value.message and "+cpu" not in caught.value.message
    assert caught.value.hint == "of 2.14.x it has 2.14.0, 2.14.1"
    # an index that cannot be asked is not a verdict: the torch step reports it later
    check_torch_release("2.14.9", PipSettings(index_url="http://127.0.0.1:9/simple/"))


def test_a_torch_release_in_a_find_links_folder_is_on_the_index(tmp_path: Path) -> None:
    from archwheel.effects.pipconfig import PipSettings
    from archwheel.wheelbuild.usecase import check_torch_release

    (tmp_path / "simple").mkdir()  # an index without torch
    links = tmp_path / "wheels"
    links.mkdir()
    (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    pip = PipSettings(index_url=(tmp_path / "simple").as_uri(), find_links=(str(links),))
    check_torch_release("2.13.0+cpu", pip)
