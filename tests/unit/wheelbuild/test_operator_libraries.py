"""A project whose package opens its operator library with ``torch.ops.load_library`` (no
``PyInit_``): the plan says which library, where, its operator namespace, and that the smoke
snippet must load it that way rather than import it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archwheel.facts.arch import ArchList
from archwheel.verdicts.op_libraries import load_library_calls
from archwheel.wheelbuild.sources.source_check import look_at_source
from tests.support.cli import CliRun
from tests.support.torch_pin_support import fake_torch_wheel

FILES = {
    "setup.py": "from setuptools import setup\nsetup(name='myops', version='1.0')\n",
    "myops/__init__.py": (
        "from pathlib import Path\nimport torch\n\n"
        "torch.ops.load_library(str(Path(__file__).with_name('_ops.so')))\n"
        "def axpy(x, y, a):\n    return torch.ops.myops_ns.axpy(x, y, a)\n"
    ),
    "csrc/ops.cpp": (
        'TORCH_LIBRARY(myops_ns, m) { m.def("axpy(Tensor x, Tensor y, float a) -> Tensor"); }\n'
        'TORCH_LIBRARY_IMPL(myops_ns, CPU, m) { m.impl("axpy", &axpy_cpu); }\n'
    ),
    # a test that loads a library of its own is not the package's
    "tests/test_ops.py": "import torch\ntorch.ops.load_library('build/libtest_only.so')\n",
}

RECIPE = """\
schema_version = 1
[recipe]
name = "myops"
[source]
path = "src"
[toolchain]
base_image = "archwheel/debian:bookworm"
source = "pypi"
[python]
versions = ["3.11"]
[arch]
format = "torch"
default = "9.0"
[torch]
version = "2.14.1"
[build]
command = "true"
"""


def _project(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_calls_are_read_from_the_syntax_tree() -> None:
    (call,) = load_library_calls("pkg/__init__.py", FILES["myops/__init__.py"])
    assert call.where == "pkg/__init__.py:4"
    assert call.argument == "str(Path(__file__).with_name('_ops.so'))"
    assert call.names == ("_ops.so",)
    text = "from torch import ops\nops.load_library(LIB)\n# torch.ops.load_library(x)\n"
    assert [c.argument for c in load_library_calls("a.py", text)] == ["LIB"]
    assert load_library_calls("a.py", "def load_library(:\n") == ()  # does not parse
    assert load_library_calls("a.py", "lib.load_library('x.so')\n") == ()  # not torch's


def test_look_at_source_names_the_library_and_its_namespace(tmp_path: Path) -> None:
    _project(tmp_path, FILES)
    look = look_at_source(tmp_path, tuple(FILES), "TORCH_CUDA_ARCH_LIST", ArchList.parse("9.0"))
    row = dict(look.rows)["operator library"]
    assert row.startswith("myops/__init__.py:4 opens torch.ops.load_library(")
    assert "(_ops.so)" in row and "torch.ops.myops_ns.<op>" in row
    assert "must load it with torch.ops.load_library(...)" in row and "not import it" in row
    assert "libtest_only" not in row
    plain = {k: v for k, v in FILES.items() if k != "myops/__init__.py"}
    plain_root = tmp_path / "plain"
    _project(plain_root, plain)
    look = look_at_source(plain_root, tuple(plain), "TORCH_CUDA_ARCH_LIST", ArchList.parse("9.0"))
    assert "operator library" not in dict(look.rows)


def test_the_plan_says_the_smoke_snippet_must_load_the_library(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path / "src", FILES)
    (tmp_path / "myops.toml").write_text(RECIPE)
    cache = tmp_path / "cache" / "archwheel" / "torch-wheels"
    cache.mkdir(parents=True)
    fake_torch_wheel(cache, python="cp311")
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    code, out, err = cli_run(
        "build", "--recipe", str(tmp_path / "myops.toml"), "--plan", "--format", "json",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 0, err
    row = json.loads(out)["plan"]["operator library"]
    assert "myops/__init__.py:4 opens torch.ops.load_library" in row
    assert "smoke snippet must load it" in row
