"""diff on audit documents and its command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from archwheel.verdicts.diff import diff, library_key, side_from_audit
from tests.support.can_load_fakes import validate_schema
from tests.support.cli import CliRun
from tests.support.diff_documents import _document


def test_library_key_drops_auditwheel_hashes() -> None:
    assert library_key("x.libs/libcudart.faf08d9a.so.13") == "x.libs/libcudart.so.13"
    assert library_key("x/_C.so") == "x/_C.so"


def test_rule_on_documents() -> None:
    old = _document({"x/a.so": [("sass", "sm_80", 10), ("sass", "sm_90", 20)],
                     "x/b.so": [("ptx", "compute_90", 5)]})  # fmt: skip
    new = _document({"x/a.so": [("sass", "sm_90", 25), ("sass", "sm_120", 30)],
                     "x/b.so": [("ptx", "compute_90", 5)]})  # fmt: skip
    report = diff(
        side_from_audit("old", old["inputs"][0]),  # type: ignore[index]
        side_from_audit("new", new["inputs"][0]),  # type: ignore[index]
    )
    a = next(c for c in report.libraries if c.path == "x/a.so")
    assert a.added == ("sm_120",) and a.dropped == ("sm_80",)
    assert ("sm_90", 20, 25) in a.sizes
    assert next(c for c in report.libraries if c.path == "x/b.so").status == "same"
    assert report.regression and report.exit_code == 1
    assert report.archs_gone == ("sm_80",)
    back = diff(report.new, report.old)
    assert back.regression  # sm_120 lost the other way round


def test_cli_documents_and_bad_input(cli_run: CliRun, tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    new = tmp_path / "new.json"
    old.write_text(json.dumps(_document({"x/a.so": [("sass", "sm_80", 10)]})))
    new.write_text(json.dumps(_document({"x/a.so": [("sass", "sm_80", 12), ("sass", "sm_90", 9)]})))
    code, out, _err = cli_run("diff", str(old), str(new), "--format", "markdown")
    assert code == 0 and "sm_90" in out and "| library |" in out
    code, out, _err = cli_run("diff", str(new), str(old), "--format", "json")
    assert code == 1 and json.loads(out)["archs_gone"] == ["sm_90"]
    validate_schema(json.loads(out), "diff")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    code, _out, err = cli_run("diff", str(broken), str(new))
    assert code == 3 and f"{broken}: not JSON: Expecting property name" in err
    two = tmp_path / "two.json"
    doc = _document({})
    doc["inputs"] = [*doc["inputs"], *doc["inputs"]]  # type: ignore[misc]
    two.write_text(json.dumps(doc))
    code, _out, err = cli_run("diff", str(two), str(new))
    assert code == 2 and "holds 2 audited inputs" in err
    code, _out, err = cli_run("diff", str(tmp_path / "missing.whl"), str(new))
    assert code == 3 and "no such file" in err


def test_another_archwheel_report_is_not_read_as_an_empty_build(
    cli_run: CliRun, tmp_path: Path
) -> None:
    """can-run's JSON report has an 'inputs' list too (so has can-load's): read as an audit, it
    was a build without libraries, and `diff report.json new.whl` said "no arch lost" (exit 0),
    a CI gate passed on the wrong file. Now each is refused as not an audit document."""
    from tests.support.index_wheels import device_library, make_dist

    wheel = make_dist(tmp_path, "x", "1.0", libraries={"a.so": device_library(80)})
    _code, out, err = cli_run("can-run", str(wheel), "--cc", "8.0", "--format", "json")
    assert json.loads(out)["inputs"], err
    report = tmp_path / "can-run.json"
    report.write_text(out)
    code, _out, err = cli_run("diff", str(report), str(wheel))
    assert code == 3, err
    assert f"{report}: not an audit document but a can-run report" in err
    hollow = tmp_path / "hollow.json"
    document = _document({"x/a.so": [("sass", "sm_80", 10)]})
    del document["inputs"][0]["libraries"]  # type: ignore[index]
    hollow.write_text(json.dumps(document))
    code, _out, err = cli_run("diff", str(hollow), str(wheel))
    assert code == 3 and "its input has no 'libraries' list" in err


@pytest.mark.parametrize(
    ("library", "where"),
    [
        ({"path": "x/a.so", "images": [{"arch": "sm_80", "stored_bytes": -1}]},
         "$.libraries[0].images[0].stored_bytes"),
        ({"path": "", "images": []}, "$.libraries[0].path"),
        ({"path": "x/a.so", "images": [{"arch": 80}]}, "$.libraries[0].images[0].arch"),
    ],
)  # fmt: skip
def test_a_side_refuses_a_value_of_the_wrong_type_naming_where(
    library: dict[str, object], where: str
) -> None:
    document = {"source": "x.whl", "complete": True, "libraries": [library]}
    with pytest.raises(ValueError, match=re.escape(where)):
        side_from_audit("old", document)
