"""The build's range gate (wheelbuild/gate.range_gate): can-load of the built wheel against every
release of ``[torch] loads_with``, on compiled fake torch wheels (g++ only) in a find-links
folder, and the Requires-Dist the checks back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from archwheel.effects.pipconfig import PipSettings
from archwheel.wheelbuild.wheel.gate import RangeRequest, range_gate
from tests.support.can_load_fakes import TAG, Fakes

# Which fake torch each release is: "new" exports c10::foo, which the extension calls.
RELEASES = {"2.12.1": "new", "2.13.0": "old", "2.14.0": "new", "2.14.1": "new", "2.15.0": "new"}


def _index(fakes: Fakes, folder: Path) -> PipSettings:
    """A find-links folder of the fake torches, and an empty index (nothing asked of PyPI)."""
    links = folder / "links"
    links.mkdir(parents=True)
    for version, kind in RELEASES.items():
        source = fakes.torch_new if kind == "new" else fakes.torch_old
        shutil.copy(source, links / f"torch-{version}-{TAG}.whl")
    (folder / "simple").mkdir()
    return PipSettings(index_url=(folder / "simple").as_uri(), find_links=(str(links),))


def test_the_claim_states_exactly_the_releases_that_loaded_it(fakes: Fakes, tmp_path: Path) -> None:
    pip = _index(fakes, tmp_path)
    lines: list[str] = []
    request = RangeRequest(
        built="2.14.1", loads_with=("2.12.1", "2.13.0", "2.14.1", "2.15.0"), python="3.11",
        pip=pip, cache=tmp_path / "cache", on_event=lines.append,
    )  # fmt: skip
    verdict = range_gate(fakes.ext, request)
    claim = verdict.claim
    assert verdict.problem is None
    assert claim.passed == ("2.12.1", "2.14.1", "2.15.0")
    assert claim.failed == ("2.13.0",)
    assert claim.unchecked == ("2.14.0",)  # inside the range, never checked: shut out
    assert claim.requirement == "torch>=2.12.1,!=2.13.0,!=2.14.0,<2.16"
    admitted = {v for v in RELEASES if Version(v) in SpecifierSet(claim.requirement[5:])}
    assert admitted == set(claim.passed)
    checks = {c["version"]: c for c in verdict.checks}
    assert set(checks) == {"2.12.1", "2.13.0", "2.15.0"}  # the build's own torch: the load gate
    assert checks["2.13.0"]["verdict"] == "does-not-load"
    assert "built against another torch version" in str(checks["2.13.0"]["summary"])
    assert checks["2.15.0"]["verdict"] == "loads"
    document = json.loads(json.dumps(verdict.to_json_dict()))  # what provenance records
    assert document["requirement"] == claim.requirement
    assert document["unchecked_excluded"] == ["2.14.0"]
    assert any("torch 2.15.0" in line for line in lines)  # what it reads is said as it goes


def test_only_the_own_torch_passing_keeps_the_pin(fakes: Fakes, tmp_path: Path) -> None:
    pip = _index(fakes, tmp_path)
    request = RangeRequest("2.14.1", ("2.13.0", "2.14.1"), "3.11", pip, tmp_path / "cache")
    verdict = range_gate(fakes.ext, request)
    assert verdict.claim.requirement == "torch==2.14.1"
    assert verdict.claim.failed == ("2.13.0",)


def test_a_release_no_index_has_is_not_claimed(fakes: Fakes, tmp_path: Path) -> None:
    pip = _index(fakes, tmp_path)
    request = RangeRequest("2.14.1", ("2.14.1", "2.14.9", "2.15.0"), "3.11", pip, tmp_path / "c")
    verdict = range_gate(fakes.ext, request)
    assert verdict.claim.requirement == "torch>=2.14.1,!=2.14.9,<2.16"
    (missing,) = [c for c in verdict.checks if c["version"] == "2.14.9"]
    assert missing["verdict"] == "unknown" and missing["summary"] == "not on the indexes"


def test_no_index_answering_keeps_the_pin_and_says_why(fakes: Fakes, tmp_path: Path) -> None:
    pip = PipSettings(index_url="http://127.0.0.1:9/simple")  # nothing listens on port 9
    request = RangeRequest("2.14.1", ("2.13.0", "2.14.1"), "3.11", pip, tmp_path / "cache")
    verdict = range_gate(fakes.ext, request)
    assert verdict.claim.requirement == "torch==2.14.1"
    assert verdict.problem is not None and "127.0.0.1:9" in verdict.problem
