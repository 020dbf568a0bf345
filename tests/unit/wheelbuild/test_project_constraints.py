"""The project's own constraints (requires-python, its torch requirement, its wheel tag), read
statically from its build files and judged against the recipe before any container."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from archwheel.errors import UsageError
from archwheel.exit_codes import EXIT_USAGE, exit_code_for
from archwheel.wheelbuild.sources.project_constraints import (
    Declared,
    ProjectCheck,
    check_project,
    python_excluded,
    read_constraints,
    read_project,
)
from tests.support.cli import CliRun
from tests.support.torch_pin_support import fake_torch_wheel

PYPROJECT = """\
[build-system]
requires = ["setuptools>=64", "torch>=2.0,<2.8", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "capped-ext"
version = "0.3.0"
requires-python = ">=3.12"
dependencies = ["numpy", "torch>=2.0,<2.8"]
"""


def _check(texts: Mapping[str, str], python: str = "3.12", ignore: bool = False) -> ProjectCheck:
    return check_project(
        read_constraints(texts),
        python=python,
        torch="2.14.1",
        requires_dist="torch==2.14.1",
        ignore_requires_python=ignore,
        recipe=Path("recipes/capped.toml"),
        recipe_pythons=("3.11", "3.12"),
    )


# -- reading ------------------------------------------------------------------------------------


def test_pyproject_declares_python_and_torch_in_both_places() -> None:
    found = read_constraints({"pyproject.toml": PYPROJECT})
    assert found.requires_python == Declared(">=3.12", "pyproject.toml [project] requires-python")
    assert found.torch == (
        Declared("torch>=2.0,<2.8", "pyproject.toml [build-system] requires"),
        Declared("torch>=2.0,<2.8", "pyproject.toml [project] dependencies"),
    )
    assert found.backend == "setuptools.build_meta"


def test_setup_cfg_is_read_as_setuptools_reads_it() -> None:
    cfg = (
        "[metadata]\nname = x\n\n[options]\npython_requires = >=3.10, !=3.11.*\n"
        "install_requires =\n    numpy\n    torch >=2.1  # the ABI\nsetup_requires = torch==2.3.1\n"
        "\n[bdist_wheel]\npy_limited_api = cp39\n"
    )
    found = read_constraints({"setup.cfg": cfg})
    assert found.requires_python is not None
    assert found.requires_python.requirement == ">=3.10, !=3.11.*"
    assert [d.requirement for d in found.torch] == ["torch >=2.1", "torch==2.3.1"]
    assert found.tag == Declared("cp39-abi3", "setup.cfg [bdist_wheel] py_limited_api")


def test_setup_py_literals_are_read_and_computed_values_named_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    setup_py = f"""\
import pathlib
from setuptools import setup
pathlib.Path({str(marker)!r}).write_text("setup.py was executed")
REQUIRES = ["torch>=1.13,<2.6", "einops"]
setup(
    name="x",
    python_requires=">=3.9",
    install_requires=REQUIRES,
    setup_requires=[r for r in open("reqs.txt")],
    options={{"bdist_wheel": {{"py_limited_api": "cp310"}}}},
)
"""
    found = read_constraints({"setup.py": setup_py})
    assert not marker.exists()
    assert found.requires_python == Declared(">=3.9", "setup.py setup(python_requires=...)")
    assert found.torch == (Declared("torch>=1.13,<2.6", "setup.py setup(install_requires=...)"),)
    assert found.unread == ("setup.py setup(setup_requires=...): computed by setup.py (line 9)",)
    assert found.tag is not None and found.tag.requirement == "cp310-abi3"


def test_pyproject_wins_over_setup_py_for_requires_python() -> None:
    found = read_constraints(
        {"pyproject.toml": PYPROJECT, "setup.py": "setup(python_requires='>=3.8')"}
    )
    assert found.requires_python is not None and found.requires_python.requirement == ">=3.12"
    assert found.files == ("pyproject.toml", "setup.py")


def test_a_torch_requirement_for_another_platform_or_an_extra_is_not_the_projects() -> None:
    text = (
        '[project]\nname = "x"\nversion = "1"\n'
        "dependencies = [\"torch>=2.9; sys_platform == 'win32'\", \"torch>=2.1; extra == 'gpu'\"]\n"
    )
    assert read_constraints({"pyproject.toml": text}).torch == ()


PKG_INFO = """\
Metadata-Version: 2.1
Name: computed-ext
Version: 1.0
Requires-Python: >=3.10,<3.13
Requires-Dist: numpy
Requires-Dist: torch<2.9,>=2.4
Requires-Dist: torch>=2.9; sys_platform == "win32"

A long description: Requires-Python: >=9 is not a header here.
"""


def test_an_sdists_pkg_info_gives_what_setup_py_computes(tmp_path: Path) -> None:
    """setup.py computes both values (not read statically); the sdist's PKG-INFO, which the
    backend wrote from them, says what they came to. read_project finds it at the top."""
    setup_py = "import v\nsetup(python_requires=v.PY, install_requires=v.REQS)\n"
    (tmp_path / "setup.py").write_text(setup_py)
    (tmp_path / "PKG-INFO").write_text(PKG_INFO)
    texts = read_project(tmp_path, ["setup.py", "PKG-INFO", "src/x.cpp"])
    assert set(texts) == {"setup.py", "PKG-INFO"}
    found = read_constraints(texts)
    assert found.requires_python == Declared(">=3.10,<3.13", "PKG-INFO Requires-Python")
    origin = "PKG-INFO Requires-Dist, what setup.py (line 2) computed when the sdist was made"
    assert found.torch == (Declared("torch<2.9,>=2.4", origin),)
    assert len(found.unread) == 2 and all(u.startswith("setup.py") for u in found.unread)
    assert found.files == ("setup.py", "PKG-INFO")
    assert not _check(texts, python="3.12").python_ignored
    with pytest.raises(UsageError, match="PKG-INFO Requires-Python"):
        _check(texts, python="3.13")


def test_the_build_files_win_over_pkg_info_and_dynamic_fields_are_not_taken() -> None:
    found = read_constraints({"pyproject.toml": PYPROJECT, "PKG-INFO": PKG_INFO})
    assert found.requires_python is not None
    assert found.requires_python.origin == "pyproject.toml [project] requires-python"
    assert all(d.origin.startswith("pyproject.toml") for d in found.torch)
    dynamic = PKG_INFO.replace("Version: 1.0\n", "Version: 1.0\nDynamic: Requires-Dist\n")
    dynamic = dynamic.replace("Metadata-Version: 2.1", "Metadata-Version: 2.2")
    found = read_constraints({"PKG-INFO": dynamic})
    assert found.torch == () and found.requires_python is not None
    both = dynamic.replace(
        "Dynamic: Requires-Dist", "Dynamic: requires-python\nDynamic: Requires-Dist"
    )
    assert read_constraints({"PKG-INFO": both}).requires_python is None


@pytest.mark.parametrize(
    "text", ["", "\0\0\0\xff", "Requires-Python: banana\n", "Requires-Dist: torch>=\n" * 3]
)
def test_a_pkg_info_that_says_nothing_usable_is_no_constraint(text: str) -> None:
    found = read_constraints({"PKG-INFO": text})
    assert found.requires_python is None and found.torch == ()
    assert all("\n" not in u for u in found.unread)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", "[project\nrequires-python = '>=3.12'"),
        ("pyproject.toml", "a = " + "[" * 5000 + "]" * 5000),
        ("setup.py", "setup(python_requires='>=3.9'"),
        ("setup.py", "x = " + "(" * 100_000 + ")" * 100_000),
        ("setup.py", "setup(\0)"),
        ("setup.cfg", "[options\npython_requires = >=3.9"),
        ("setup.cfg", "[options]\npython_requires = banana"),
    ],
)
def test_an_unreadable_file_is_one_note_not_a_traceback(name: str, text: str) -> None:
    found = read_constraints({name: text})
    assert found.requires_python is None
    assert len(found.unread) == 1 and found.unread[0].startswith(name)
    assert "\n" not in found.unread[0]


HUGE = "9" * 5000  # past int()'s 4300 digits: packaging parses it, then cannot compare it
LONG = "1" * 25  # past MAX_VERSION_DIGITS


@pytest.mark.parametrize("number", [HUGE, LONG])
@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", '[project]\nrequires-python = ">=3.N"\ndependencies = ["torch>=2.N"]'),
        ("pyproject.toml", '[build-system]\nrequires = ["torch==2.N.*"]\n[project]\n'
         'requires-python = "~=3.N"'),
        ("setup.cfg", "[options]\npython_requires = >=3.N\ninstall_requires =\n    torch<=2.N\n"),
        ("setup.cfg", "[options]\npython_requires = !=3.N.*\nsetup_requires = torch>2.N\n"),
        ("setup.py", "setup(python_requires='>=3.N', install_requires=['torch>=2.N'])"),
        ("setup.py", "R = '===3.N'\nsetup(python_requires=R, setup_requires=['torch!=2.N'])"),
        ("PKG-INFO", "Metadata-Version: 2.1\nName: x\nVersion: 1.0\nRequires-Python: >=3.N\n"
         "Requires-Dist: torch>=2.N\n"),
    ],
)  # fmt: skip
def test_an_absurd_version_number_is_not_read_statically(name: str, text: str, number: str) -> None:
    found = read_constraints({name: text.replace("N", number)})
    assert found.requires_python is None and found.torch == ()
    assert len(found.unread) == 2, found.unread
    assert all(u.startswith(name) and "more than 24 digits" in u for u in found.unread)
    assert all(len(u) < 300 and "\n" not in u for u in found.unread)
    # and judging it against the build is no error
    check = check_project(
        found, python="3.12", torch="2.14.1", requires_dist=None,
        ignore_requires_python=False, recipe=Path("r.toml"),
    )  # fmt: skip
    assert not check.python_ignored and check.torch == ()


def test_a_setup_py_number_of_thousands_of_digits_is_a_file_not_parsed() -> None:
    found = read_constraints({"setup.py": f"V = {HUGE}\nsetup(python_requires='>=3.9')"})
    assert found.unread == ("setup.py (not parsed: SyntaxError)",)


# -- judging ------------------------------------------------------------------------------------


def test_python_excluded_reads_a_minor_version_as_any_of_its_releases() -> None:
    assert python_excluded(">=3.12", "3.11")
    assert not python_excluded(">=3.12", "3.12")
    assert not python_excluded(">=3.11.4", "3.11")  # a later 3.11 is admitted
    assert python_excluded("!=3.11.*", "3.11")
    assert not python_excluded("<3.14", "3.13t")
    assert python_excluded("<3.13", "3.14t")


def test_a_python_the_project_excludes_is_refused_naming_what_it_allows() -> None:
    with pytest.raises(UsageError) as caught:
        _check({"pyproject.toml": PYPROJECT}, python="3.11")
    text = caught.value.one_line()
    assert exit_code_for(caught.value) == EXIT_USAGE
    assert text.startswith(
        "the project requires Python >=3.12 (pyproject.toml [project] requires-python); the "
        "build targets Python 3.11, which it excludes"
    )
    assert "build for 3.12 (--python)" in text and "ignore_requires_python = true" in text


def test_ignore_requires_python_builds_with_a_warning_and_a_record() -> None:
    check = _check({"pyproject.toml": PYPROJECT}, python="3.11", ignore=True)
    assert check.python_ignored
    assert check.warnings()[0] == (
        "the project requires Python >=3.12 (pyproject.toml [project] requires-python); the "
        "build targets Python 3.11: built anyway ([python] ignore_requires_python = true)"
    )
    record = check.to_json_dict()["requires_python"]
    assert record == {
        "requirement": ">=3.12",
        "origin": "pyproject.toml [project] requires-python",
        "python": "3.11",
        "ignored": True,
    }


def test_an_overridden_torch_cap_is_one_line_each() -> None:
    check = _check({"pyproject.toml": PYPROJECT})
    assert check.warnings() == [
        "the project requires torch>=2.0,<2.8 (pyproject.toml [build-system] requires); the "
        "recipe pins torch 2.14.1: overridden (the wheel's Requires-Dist says torch==2.14.1)",
        "the project requires torch>=2.0,<2.8 (pyproject.toml [project] dependencies); the "
        "recipe pins torch 2.14.1: overridden (the wheel's Requires-Dist says torch==2.14.1)",
    ]
    record = json.loads(json.dumps(check.to_json_dict()))
    assert [t["overridden"] for t in record["torch"]] == [True, True]
    met = _check({"pyproject.toml": PYPROJECT.replace("<2.8", "<2.15")})
    assert met.warnings() == []
    assert any("torch 2.14.1 meets it" in value for _, value in met.rows())


def test_the_plan_shows_the_tag_the_project_builds() -> None:
    skbuild = (
        '[build-system]\nrequires = ["scikit-build-core"]\n'
        'build-backend = "scikit_build_core.build"\n'
        '[project]\nname = "x"\nversion = "1"\n[tool.scikit-build]\nwheel.py-api = "py3"\n'
    )
    row = _check({"pyproject.toml": skbuild}).python_row()
    assert row.startswith("3.12 (with the GIL; wheel tag py3-none (pyproject.toml")
    assert "cp312-cp312" not in row
    plain = _check({"pyproject.toml": PYPROJECT}).python_row()
    assert "wheel tag cp312-cp312 (setuptools.build_meta's tag for an extension module)" in plain
    other = '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
    assert "the tag follows the backend" in _check({"pyproject.toml": other}).python_row()


# -- end to end: build --plan on a real folder, nothing started ----------------------------------

RECIPE = """\
schema_version = 1
[recipe]
name = "capped"
[source]
path = "src"
[toolchain]
base_image = "archwheel/debian:bookworm"
source = "pypi"
[python]
versions = ["3.11", "3.13"]
IGNORE
[arch]
format = "torch"
default = "9.0"
[torch]
version = "2.14.1"
[build]
command = "true"
"""


def _project(tmp_path: Path, ignore: bool) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pyproject.toml").write_text(PYPROJECT)
    recipe = tmp_path / "capped.toml"
    recipe.write_text(RECIPE.replace("IGNORE", "ignore_requires_python = true" if ignore else ""))
    cache = tmp_path / "cache" / "archwheel" / "torch-wheels"
    cache.mkdir(parents=True)
    fake_torch_wheel(cache, python="cp311")
    fake_torch_wheel(cache, python="cp313")
    return recipe


def test_build_plan_refuses_an_excluded_python_before_anything_runs(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = _project(tmp_path, ignore=False)
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    code, _, err = cli_run(
        "build", "--recipe", str(recipe), "--plan", "--out", str(tmp_path / "out"),
        "--python", "3.11",
    )  # fmt: skip
    assert code == 2, err
    (line,) = [line for line in err.splitlines() if line.startswith("archwheel: error:")]
    assert "the project requires Python >=3.12" in line and "build for 3.13" in line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_build_plan_says_each_contradiction_and_the_json_records_it(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = _project(tmp_path, ignore=True)
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    argv = ("build", "--recipe", str(recipe), "--plan", "--out", str(tmp_path / "out"))
    code, out, err = cli_run(*argv, "--python", "3.11")
    assert code == 0, err
    text = " ".join((out + err).split())
    assert "warning: the project requires Python >=3.12" in text
    assert (
        "warning: the project requires torch>=2.0,<2.8 (pyproject.toml [project] dependencies); "
        "the recipe pins torch 2.14.1: overridden" in text
    )
    code, out, err = cli_run(*argv, "--python", "3.13", "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    # the plan's python row gives the tag the backend will write, and says why
    assert document["plan"]["python"] == (
        "3.13 (with the GIL; wheel tag cp313-cp313 (setuptools.build_meta's tag for an "
        "extension module))"
    )
    project = document["project"]
    assert project["requires_python"]["ignored"] is False
    assert [t["origin"] for t in project["torch"] if t["overridden"]] == [
        "pyproject.toml [build-system] requires",
        "pyproject.toml [project] dependencies",
    ]


def test_the_recipe_key_is_validated(tmp_path: Path) -> None:
    from archwheel.errors import RecipeError
    from archwheel.facts.catalog import load_facts
    from archwheel.wheelbuild.recipes.recipe import load_recipe

    recipe = _project(tmp_path, ignore=False)
    assert not load_recipe(recipe, load_facts()).ignore_requires_python
    recipe.write_text(RECIPE.replace("IGNORE", 'ignore_requires_python = "yes"'))
    with pytest.raises(RecipeError) as caught:
        load_recipe(recipe, load_facts())
    assert "ignore_requires_python" in caught.value.one_line()
    assert "true or false" in caught.value.one_line()


def test_build_plan_with_an_absurd_requires_python_names_it_and_goes_on(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = _project(tmp_path, ignore=False)
    pyproject = tmp_path / "src" / "pyproject.toml"
    pyproject.write_text(PYPROJECT.replace(">=3.12", f">=3.{HUGE}"))
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    argv = ("build", "--recipe", str(recipe), "--plan", "--out", str(tmp_path / "out"))
    code, out, err = cli_run(*argv, "--python", "3.11", "--format", "json")
    assert code == 0, err
    (unread,) = json.loads(out)["project"]["unread"]
    assert unread.startswith("pyproject.toml [project] requires-python ('>=3.999")
    assert unread.endswith("is a specifier with a number of more than 24 digits)")


# -- what code computes: said so, with its line, never quoted as declared -------------------------

REWRITTEN = """\
import os
import torch
from setuptools import setup
REQUIRES = ["torch>=2.5", "numpy"]
REQUIRES[0] = f"torch=={torch.__version__.split('+')[0]}"
cmdclass = {}
if os.getenv("MYEXT_OWN_WHEEL"):
    cmdclass["bdist_wheel"] = OwnWheel
setup(
    name="x",
    install_requires=REQUIRES,
    options={"bdist_wheel": {"py_limited_api": "cp39", "build_number": "2"}},
    cmdclass=cmdclass,
)
"""


def test_a_list_rewritten_before_setup_is_computed_not_declared() -> None:
    found = read_constraints({"setup.py": REWRITTEN})
    assert found.torch == ()  # not the first literal: code replaces it (line 5)
    assert found.unread == ("setup.py setup(install_requires=...): computed by setup.py (line 5)",)
    assert found.torch_computed == "setup.py (line 5)"
    assert found.tag == Declared(
        "cp39-abi3", "setup.py setup(options={'bdist_wheel': {'py_limited_api': ...}})"
    )
    assert found.build_number is not None and found.build_number.requirement == "2"
    assert found.own_bdist_wheel == "setup.py (line 8)"  # swapped in behind a switch
    # appended to, or bound twice: computed too
    for change in ('REQUIRES.append("torch>=2.6")', 'REQUIRES = ["torch>=2.6"]', "REQUIRES += []"):
        text = 'REQUIRES = ["torch>=2.5"]\n' + change + "\nsetup(install_requires=REQUIRES)\n"
        assert read_constraints({"setup.py": text}).torch == (), change
    # the sdist's PKG-INFO then says what setup.py computed when the sdist was made
    with_pkg = read_constraints({"setup.py": REWRITTEN, "PKG-INFO": PKG_INFO})
    assert with_pkg.torch[0].origin == (
        "PKG-INFO Requires-Dist, what setup.py (line 5) computed when the sdist was made"
    )


def test_the_plan_says_what_code_decides_of_the_tag() -> None:
    check = _check({"setup.py": REWRITTEN})
    assert check.wheel_tag() == (
        "cp39-abi3 (setup.py setup(options={'bdist_wheel': {'py_limited_api': ...}})); the "
        "project brings its own bdist_wheel (setup.py (line 8)): its tag; build number 2 "
        "(setup.py setup(options={'bdist_wheel': {'build_number': ...}}))"
    )
    assert check.predictions() == {
        "tag": "cp39-abi3", "build": None, "requires_python": None, "torch": "torch==2.14.1"}  # fmt: skip
    assert (
        "project",
        "its requirements are computed by setup.py (line 5): the wheel's Requires-Dist says "
        "torch==2.14.1",
    ) in check.rows()
    computed = "from setuptools import setup\nsetup(options=make_options())\n"
    tag = _check({"setup.py": computed})
    assert tag.wheel_tag() == "computed by setup.py (line 2) (bdist_wheel options)"
    assert tag.predicted_tag() is None
    plain = "from setuptools import setup\nsetup()\n"
    cfg = _check({"setup.cfg": "[bdist_wheel]\nbuild_number = 7\n", "setup.py": plain})
    assert cfg.predictions()["build"] == "7"
    assert cfg.predictions()["tag"] == "cp312-cp312"
    # a backend archwheel does not know chooses its own tag: no prediction
    other = '[build-system]\nrequires = []\nbuild-backend = "own_backend"\n'
    assert _check({"pyproject.toml": other}).predicted_tag() is None


def test_the_built_wheel_is_compared_with_the_plan(tmp_path: Path) -> None:
    from archwheel.wheelbuild.run.provenance import compare_predictions, wheel_says
    from tests.support.builders import write_zip

    metadata = (
        "Metadata-Version: 2.1\nName: x\nVersion: 1.0\nRequires-Python: >=3.9\n"
        "Requires-Dist: numpy\nRequires-Dist: torch==2.5.1\n"
        "Requires-Dist: torch>=2.9; sys_platform == 'win32'\n"  # not this platform's
    )
    wheel = write_zip(
        tmp_path / "x-1.0-2-cp39-abi3-manylinux_2_34_x86_64.whl",
        [("x-1.0.dist-info/METADATA", metadata.encode()), ("x-1.0.dist-info/RECORD", b"")],
    )
    found = wheel_says(wheel)
    assert found == {
        "tag": "cp39-abi3", "build": "2", "requires_python": ">=3.9", "torch": "torch==2.5.1"}  # fmt: skip
    planned = {
        "tag": "cp39-abi3",
        "build": "2",
        "requires_python": ">=3.9",
        "torch": "torch==2.5.1",
    }
    assert compare_predictions(planned, found) == []
    assert compare_predictions({**planned, "requires_python": ">= 3.9"}, found) == []  # same set
    wrong = {"tag": "cp311-cp311", "build": "", "requires_python": None, "torch": "torch==2.14.1"}
    assert compare_predictions(wrong, found) == [
        "the wheel's tag is cp39-abi3; the plan expected cp311-cp311",
        "the wheel's build number is 2; the plan expected none",
        "the wheel's torch requirement is torch==2.5.1; the plan expected torch==2.14.1",
    ]
