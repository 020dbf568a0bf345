"""``archwheel diff``: two builds compared, and the arch-regression gate."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from archwheel.verdicts.diff import diff, library_key, side_from_audit
from tests.builders import write_zip
from tests.conftest import CliRun, fetch_wheel
from tests.test_can_load import validate_schema

TAG = "cp311-cp311-manylinux_2_28_x86_64"


def _document(libraries: dict[str, list[tuple[str, str, int]]]) -> dict[str, object]:
    """An audit document in the shape `archwheel audit --format json` writes."""
    return {
        "schema_version": 1,
        "inputs": [
            {
                "source": f"x-1.0-{TAG}.whl",
                "complete": True,
                "metadata": {"file": f"x-1.0-{TAG}.whl"},
                "libraries": [
                    {
                        "path": path,
                        "images": [
                            {"kind": k, "arch": a, "stored_bytes": n, "uncompressed_bytes": n}
                            for k, a, n in images
                        ],
                    }
                    for path, images in libraries.items()
                ],
            }
        ],
    }


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
    assert code == 3 and "not a readable JSON document" in err
    two = tmp_path / "two.json"
    doc = _document({})
    doc["inputs"] = [*doc["inputs"], *doc["inputs"]]  # type: ignore[misc]
    two.write_text(json.dumps(doc))
    code, _out, err = cli_run("diff", str(two), str(new))
    assert code == 2 and "holds 2 audited inputs" in err
    code, _out, err = cli_run("diff", str(tmp_path / "missing.whl"), str(new))
    assert code == 3 and "no such file" in err


@pytest.mark.nvcc
def test_two_builds_with_different_arch_lists(nvcc: Path, cli_run: CliRun, tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
                      'extern "C" void launch(float* x) { k<<<1, 32>>>(x); }\n')  # fmt: skip
    wheels = []
    for label, gencode in (
        ("1.0", ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]),
        ("1.1", ["-gencode=arch=compute_90,code=sm_90",
                 "-gencode=arch=compute_120,code=[sm_120,compute_120]"]),
    ):  # fmt: skip
        lib = tmp_path / f"k{label}.so"
        subprocess.run(
            [str(nvcc), "-shared", "-Xcompiler", "-fPIC", *gencode, "-o", str(lib), str(source)],
            check=True, capture_output=True,
        )  # fmt: skip
        meta = f"Metadata-Version: 2.1\nName: kern\nVersion: {label}\n".encode()
        wheels.append(
            write_zip(
                tmp_path / f"kern-{label}-{TAG}.whl",
                [("kern/_k.so", lib.read_bytes()), (f"kern-{label}.dist-info/METADATA", meta)],
            )
        )
    code, out, err = cli_run("diff", str(wheels[0]), str(wheels[1]), "--format", "json")
    assert code == 1, out + err
    doc = json.loads(out)
    (lib_change,) = doc["libraries"]
    assert lib_change["dropped"] == ["sm_80"]
    assert lib_change["added"] == ["sm_120", "compute_120"]
    assert {"key": "version", "before": "1.0", "after": "1.1"} in doc["versions"]
    # the same from saved audit documents
    saved = []
    for wheel in wheels:
        code, out, _err = cli_run("audit", str(wheel), "--format", "json")
        path = tmp_path / f"{wheel.stem}.json"
        path.write_text(out)
        saved.append(path)
    code, out, _err = cli_run("diff", str(saved[0]), str(saved[1]), "--format", "json")
    assert code == 1
    assert json.loads(out)["libraries"][0]["dropped"] == ["sm_80"]


@pytest.mark.realwheel
@pytest.mark.slow
def test_real_torch_wheels(torch_wheel: Path, cli_run: CliRun) -> None:
    cpu = fetch_wheel("torch==2.13.0")
    code, out, err = cli_run("diff", str(torch_wheel), str(cpu), "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    validate_schema(doc, "diff")
    assert "sm_90" in doc["archs_gone"] and "compute_120" in doc["archs_gone"]
    cuda = next(c for c in doc["libraries"] if c["path"] == "torch/lib/libtorch_cuda.so")
    assert cuda["status"] == "removed" and "sm_120" in cuda["dropped"]
    pins = {p["name"]: p for p in doc["pins"]}
    assert pins["cuda-toolkit"]["before"] == "==13.0.3" and pins["cuda-toolkit"]["after"] is None
    code, out, _err = cli_run("diff", str(cpu), str(torch_wheel), "--format", "markdown")
    assert code == 0 and "libtorch_cuda.so" in out and "no arch lost" in out
