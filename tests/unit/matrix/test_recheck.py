"""``matrix --recheck`` (matrix/recheck.py) on a published index of compiled fake extensions
(g++, with a fatbin section so the index's audit takes them) and fake torch releases in a
find-links folder: each new release gets the answer its load verdict and the wheel's
Requires-Dist give, and the CLI lists the wheels to rebuild."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.facts.arch import ArchList
from archwheel.matrix.index import Candidate, publish
from archwheel.matrix.layout import CURRENT
from archwheel.matrix.recheck import Action, recheck_index
from tests.support.builders import Entry, container
from tests.support.can_load_fakes import TAG, Fakes, make_wheel
from tests.support.cli import CliRun
from tests.support.index_wheels import make_dist
from tests.support.schemas import matrix_recheck_schema

# Which fake torch each release on the index is: "new" exports c10::foo, which the extension
# calls; "old" does not.
RELEASES = {
    "2.13.0": "new", "2.14.1": "new", "2.14.2": "old", "2.15.0": "new", "2.16.0": "old",
}  # fmt: skip


def _with_device_code(so: Path, out: Path) -> Path:
    """The compiled extension with an sm_90 fatbin section added (objcopy)."""
    fatbin = out.with_suffix(".fatbin")
    fatbin.write_bytes(container(Entry(sm=90)))
    subprocess.run(
        ["objcopy", "--add-section", f".nv_fatbin={fatbin}", str(so), str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


@pytest.fixture
def index(fakes: Fakes, tmp_path: Path) -> tuple[Path, PipSettings]:
    links = tmp_path / "links"
    links.mkdir()
    for version, kind in RELEASES.items():
        source = fakes.torch_new if kind == "new" else fakes.torch_old
        shutil.copy(source, links / f"torch-{version}-{TAG}.whl")
    (tmp_path / "simple").mkdir()
    pip = PipSettings(index_url=(tmp_path / "simple").as_uri(), find_links=(str(links),))
    module = _with_device_code(fakes.ext_so, tmp_path / "_ext.so")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    files = {"myext/_ext.so": module}
    pinned = make_wheel(wheels, "pinned", "1.0", files, ("torch==2.14.1",))
    ranged = make_wheel(wheels, "ranged", "1.0", files, ("torch>=2.13.0,<2.15",))
    newest = make_wheel(wheels, "newest", "1.0", files, ("torch==2.16.0",))
    untorched = make_wheel(wheels, "plain", "1.0", files)
    provenance = ranged.with_name(ranged.name + ".provenance.json")
    provenance.write_text(
        json.dumps(
            {
                "wheel": {"sha256": _sha256(ranged)},
                "torch_range": {
                    "passed": ["2.13.0", "2.14.1"],
                    "checks": [{"version": "2.13.0", "verdict": "loads"}],
                },
            }
        )
    )
    expect = ArchList.parse("9.0")
    result = publish(
        tmp_path / "index",
        [
            Candidate(pinned, expect=expect, cuda="13.0"),
            Candidate(ranged, provenance, expect=expect, torch="2.14.1", cuda="13.0"),
            Candidate(newest, expect=expect, cuda="13.0"),
            Candidate(untorched, expect=expect),
        ],
    )
    assert result.ok, result.refused
    return tmp_path / "index", pip


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_new_release_gets_its_answer(index: tuple[Path, PipSettings], tmp_path: Path) -> None:
    folder, pip = index
    said: list[str] = []
    report = recheck_index(folder, pip=pip, cache=tmp_path / "cache", on_event=said.append)
    # The index's torch files are asked for once, not once per wheel and again per check.
    assert len([line for line in said if line.startswith("index ")]) == 1, said
    by_file = {w.file.split("-")[0]: w for w in report.wheels}
    assert set(by_file) == {"pinned", "ranged", "newest"}  # "plain" is not built against torch
    ranged = by_file["ranged"]
    assert ranged.checked == ("2.13.0", "2.14.1")
    assert {r.version: r.action for r in ranged.releases} == {
        "2.14.2": Action.BROKEN,  # its range admits the patch release, which lacks c10::foo
        "2.15.0": Action.CLAIMABLE,  # loads, not claimed
        "2.16.0": Action.NEEDS_BUILD,
    }
    broken = next(r for r in ranged.releases if r.version == "2.14.2")
    assert "another torch version" in broken.summary
    pinned = by_file["pinned"]
    assert {r.version: r.action for r in pinned.releases} == {
        "2.14.2": Action.NEEDS_BUILD,
        "2.15.0": Action.CLAIMABLE,
        "2.16.0": Action.NEEDS_BUILD,
    }
    assert by_file["newest"].releases == () and not by_file["newest"].must_rebuild
    assert {w.file.split("-")[0] for w in report.rebuild} == {"pinned", "ranged"}
    assert report.exit_code == 1


def test_the_cli_lists_the_wheels_to_rebuild(
    index: tuple[Path, PipSettings],
    cli_run: CliRun,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder, pip = index
    # pip's configuration, as `pip config list` gives it to archwheel: only these two
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", str(pip.index_url))
    monkeypatch.setenv("PIP_FIND_LINKS", pip.find_links[0])
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    code, out, err = cli_run("matrix", "--recheck", "--index", str(folder), "--format", "json")
    assert code == 1, out + err
    document = json.loads(out)
    jsonschema.validate(document, matrix_recheck_schema())
    assert document["kind"] == "matrix-recheck"
    assert sorted(f.split("-")[0] for f in document["rebuild"]) == ["pinned", "ranged"]
    code, out, err = cli_run("matrix", "--recheck", "--index", str(folder))
    assert code == 1
    assert "2 wheels must be rebuilt" in " ".join(out.split())
    assert "broken" in out


def test_recheck_refuses_what_does_not_apply(cli_run: CliRun, tmp_path: Path) -> None:
    code, _out, err = cli_run("matrix", "--recheck", "--index", str(tmp_path), "--torch", "2.14.1")
    assert code == 2 and "does not apply" in err and "Traceback" not in err
    code, _out, err = cli_run("matrix", "--recheck", "--index", str(tmp_path / "none"))
    assert code == 2 and "no such folder" in err


def _published(root: Path) -> Path:
    index = root / "index"
    assert publish(index, [Candidate(make_dist(root / "w", "pure", "1.0"))]).ok
    return index


def _dangling(index: Path, _outside: Path) -> None:
    shutil.rmtree((index / CURRENT).resolve())


def _relinked(target: str) -> Callable[[Path, Path], None]:
    def relink(index: Path, outside: Path) -> None:
        (index / CURRENT).unlink()
        (index / CURRENT).symlink_to(target.format(outside=outside))

    return relink


def _unpublished(index: Path, _outside: Path) -> None:
    (index / CURRENT).unlink()


# A damaged index: its current names a tree that is gone, leads out of trees/ (to an outside
# folder holding a manifest of its own), or is missing.
DAMAGED = {
    "dangling-current": _dangling,
    "current-outside": _relinked("{outside}"),
    "current-climbs": _relinked("trees/../../outside"),
    "current-dangling-elsewhere": _relinked("trees/20990101T000000000000Z-00000000"),
    "no-current": _unpublished,
}


@pytest.mark.parametrize("shape", sorted(DAMAGED))
def test_recheck_of_a_damaged_index_is_one_line_and_exit_2(
    cli_run: CliRun, tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``current`` whose tree is gone was read as an empty index: an empty table and exit 0,
    "nothing to rebuild". Each damaged shape is one line and exit 2, before pip is asked (a
    pip that is not there would be an error of its own)."""
    index = _published(tmp_path)
    outside = tmp_path / "outside"
    shutil.copytree((index / CURRENT).resolve(), outside)  # a manifest that looks right
    DAMAGED[shape](index, outside)
    refused = tmp_path / "pip.conf"
    refused.write_text("[global\nindex-url = https://example.invalid/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(refused))  # pip's error, were pip asked first
    code, out, err = cli_run("matrix", "--recheck", "--index", str(index))
    assert code == 2, (out, err)
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert str(index) in err and str(refused) not in err


@pytest.mark.parametrize("shape", ["file", "fifo"])
def test_recheck_of_a_file_is_exit_2(cli_run: CliRun, tmp_path: Path, shape: str) -> None:
    given = tmp_path / "index"
    if shape == "fifo":
        os.mkfifo(given)
    else:
        given.write_text("not an index")
    code, out, err = cli_run("matrix", "--recheck", "--index", str(given))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "not a folder" in err
