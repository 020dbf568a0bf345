"""The Python API checks its arguments at the boundary (docs/api.md, "What each call accepts"):
generated wrong types and values for every parameter of every public call end in a
``UsageError`` whose one line names the call and the parameter, before any work; never a
``TypeError``/``AttributeError`` from deep inside, a string split into characters, ``''`` read
as the current folder, or a bare ``ValueError`` for a NUL byte."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import archwheel
from archwheel.errors import ArchwheelError, InputError, UsageError
from archwheel.interfaces import api
from tests.support.builders import Entry, container, elf64
from tests.support.inventory_builders import build_wheel

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"
CALLS: dict[str, Callable[..., Any]] = {
    "audit": api.audit,
    "can_run": api.can_run,
    "can_load": api.can_load,
    "diff": api.diff,
}
WHEEL = "dist/x-1.0-py3-none-any.whl"  # never read: every case fails before any work
# Valid values for every parameter but the one under test.
BASE: dict[str, dict[str, object]] = {
    "audit": {"path": WHEEL},
    "can_run": {"paths": WHEEL, "ccs": ["8.0"]},
    "can_load": {"wheel": WHEEL, "with_": [WHEEL]},
    "diff": {"old": WHEEL, "new": WHEEL},
}

# -- what is wrong for each kind of parameter ---------------------------------------------------

_NUL_TEXT = st.text(max_size=20).flatmap(
    lambda t: st.integers(0, len(t)).map(lambda i: t[:i] + "\0" + t[i:])
)
_NOT_TEXT = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=8),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.builds(object),
)
_NOT_A_PATH = st.one_of(_NOT_TEXT, st.lists(st.text(min_size=1, max_size=5), max_size=3))
_BAD_PATH = st.one_of(_NOT_A_PATH, st.just(""), _NUL_TEXT)
_BAD_ITEMS = st.one_of(_NOT_TEXT, st.just(""), _NUL_TEXT)
_NOT_A_FLAG = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.booleans(), max_size=2),
)
_A_STRING = st.text(max_size=20)  # a plain string where a list belongs, "" included
_PATH_LIKE = st.text(min_size=1, max_size=10).filter(lambda t: "\0" not in t).map(Path)
_BAD_PATH_LIST = st.one_of(
    _NOT_TEXT.filter(lambda v: v is not None),
    st.lists(_BAD_PATH, min_size=1, max_size=3),
)

WRONG: dict[tuple[str, str], st.SearchStrategy[object]] = {
    ("audit", "path"): _BAD_PATH,
    ("audit", "expect"): st.one_of(
        _NOT_TEXT.filter(lambda v: v is not None),
        st.lists(st.sampled_from(["8.0", "9.0", "sm_90"]), max_size=3),
        st.just(""),
        _NUL_TEXT.filter(lambda t: t.strip("\0") == ""),
    ),
    ("audit", "deep"): _NOT_A_FLAG,
    ("audit", "all_members"): _NOT_A_FLAG,
    ("audit", "workers"): st.one_of(
        st.booleans(),
        st.integers(max_value=0),
        st.floats(),
        st.text(max_size=4),
        st.lists(st.integers(), max_size=2),
    ),
    ("can_run", "paths"): st.one_of(_BAD_PATH.filter(lambda v: not isinstance(v, list)),
                                    _BAD_PATH_LIST, st.just([]), st.just(())),
    ("can_run", "gpus"): st.one_of(_A_STRING, _NOT_TEXT, st.lists(_BAD_ITEMS, min_size=1, max_size=3)),
    ("can_run", "ccs"): st.one_of(_A_STRING, _NOT_TEXT, st.lists(_BAD_ITEMS, min_size=1, max_size=3)),
    ("can_run", "driver"): st.one_of(
        _NOT_TEXT.filter(lambda v: v is not None),
        st.just(""),
        _NUL_TEXT,
        st.sampled_from([" 570.86.10", "570.86.10\n", "570\t"]),
    ),
    ("can_run", "cuda_runtime"): st.one_of(
        _NOT_TEXT.filter(lambda v: v is not None),
        st.just(""),
        _NUL_TEXT,
        st.sampled_from([" 12.8", "12.8\n", "\x1b12.8"]),
    ),
    ("can_load", "wheel"): _BAD_PATH,
    ("can_load", "with_"): st.one_of(
        st.text(max_size=10), _PATH_LIKE, _NOT_TEXT.filter(lambda v: v is not None),
        st.lists(_BAD_PATH, min_size=1, max_size=3),
    ),
    ("can_load", "installed"): _NOT_A_FLAG,
    ("can_load", "interpreter"): st.one_of(
        _NOT_A_PATH.filter(lambda v: v is not None), st.just(""), _NUL_TEXT
    ),
    ("can_load", "host_libraries"): _NOT_A_FLAG,
    ("diff", "old"): _BAD_PATH,
    ("diff", "new"): _BAD_PATH,
}  # fmt: skip


def test_every_parameter_of_every_call_has_wrong_values_here() -> None:
    """A parameter added to a call without a check (and a strategy here) fails this test."""
    assert set(CALLS) == {"audit", "can_run", "can_load", "diff"}
    for name, call in CALLS.items():
        params = set(inspect.signature(call).parameters)
        assert {p for c, p in WRONG if c == name} == params, name


def _refused(call: str, parameter: str, value: object) -> UsageError:
    arguments = {**BASE[call], parameter: value}
    if parameter == "installed":
        arguments.pop("with_")
    with pytest.raises(UsageError) as caught:
        CALLS[call](**arguments)
    return caught.value


@pytest.mark.parametrize(("call", "parameter"), sorted(WRONG))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_wrong_argument_is_a_usage_error_naming_call_and_parameter(
    call: str, parameter: str, data: st.DataObject
) -> None:
    value = data.draw(WRONG[call, parameter], label=parameter)
    error = _refused(call, parameter, value)
    line = error.one_line()
    assert "\n" not in line and "\r" not in line, line
    assert re.match(rf"{call}: (no GPU given|{re.escape(parameter)}(\[\d+\])? )", line), line
    assert len(line) < 400, line


@pytest.mark.parametrize(
    ("call", "arguments", "words"),
    [
        ("audit", {"path": ""}, "audit: path is empty"),
        ("audit", {"path": "a\0b.whl"}, "audit: path contains a NUL byte"),
        ("audit", {"path": WHEEL, "expect": 123}, "audit: expect must be"),
        ("audit", {"path": WHEEL, "expect": ["9.0"]}, "not list ['9.0']"),
        ("audit", {"path": WHEEL, "workers": "4"}, "audit: workers must be"),
        ("audit", {"path": WHEEL, "workers": 0}, "workers must be at least 1, not 0"),
        ("audit", {"path": WHEEL, "workers": -1}, "workers must be at least 1, not -1"),
        ("can_run", {"paths": WHEEL, "gpus": None}, "can_run: gpus must be a list"),
        ("can_run", {"paths": WHEEL, "gpus": [123]}, "can_run: gpus[0] must be text"),
        ("can_run", {"paths": WHEEL, "ccs": [8.0]}, "can_run: ccs[0] must be text"),
        ("can_run", {"paths": WHEEL, "gpus": "A100"}, "not str 'A100'"),
        ("can_run", {"paths": WHEEL, "ccs": ["8.0"], "driver": 570}, "driver must be None or"),
        ("can_run", {"paths": WHEEL, "ccs": ["8.0"], "cuda_runtime": 12.8}, "not float 12.8"),
        ("can_run", {"paths": WHEEL}, "can_run: no GPU given"),
        ("can_load", {"wheel": WHEEL, "with_": WHEEL}, "with_ must be a list of paths"),
        ("diff", {"old": WHEEL, "new": None}, "diff: new must be a path"),
    ],
)
def test_the_shapes_found_by_the_probe(call: str, arguments: dict[str, object], words: str) -> None:
    with pytest.raises(UsageError) as caught:
        CALLS[call](**arguments)
    assert words in caught.value.one_line()


def _tiny_wheel(folder: Path) -> Path:
    lib = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    build_wheel(folder, "tiny", "1.0", {"tiny/libtiny.so": lib})
    return next(folder.glob("tiny-1.0-*.whl"))


def test_what_is_valid_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = _tiny_wheel(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert archwheel.audit(wheel, expect="8.0", workers=1, deep=True).ok
    assert archwheel.audit(os.fspath(wheel.name), expect=None).complete
    assert archwheel.can_run([wheel], gpus=("A100",), driver="570.86.10").exit_code == 0
    assert archwheel.can_run(wheel, ccs=["8.0,8.6"], cuda_runtime="12.8").exit_code == 0
    assert archwheel.diff(str(wheel), wheel).exit_code == 0
    assert archwheel.audit(".").complete  # the current folder, when asked for by name


def test_a_path_the_system_refuses_is_an_input_error(tmp_path: Path) -> None:
    """A name too long for the system: an archwheel error, never a bare OSError (diff raised
    one: ``[Errno 36] File name too long``)."""
    wheel = _tiny_wheel(tmp_path)
    with pytest.raises(InputError) as caught:
        archwheel.diff(tmp_path / ("x" * 300), wheel)
    assert "too long" in caught.value.one_line()
    with pytest.raises(ArchwheelError):
        archwheel.audit(tmp_path / ("x" * 100_000))


def test_docs_api_lists_what_each_parameter_accepts() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## What each call accepts") : text.index("## Errors")]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| `")]
    listed = {
        (cells[1].strip().strip("`"), name.strip().strip("`"))
        for cells in rows
        for name in cells[2].replace(" and ", ",").split(",")
        if name.strip().startswith("`")
    }
    assert set(WRONG) <= listed, sorted(set(WRONG) - listed)
