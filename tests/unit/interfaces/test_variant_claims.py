"""``audit``, ``can-run`` and ``doctor`` judge a wheel's ``variant.json`` (archwheel's or
anyone's) against its device code: real variant wheels published by ``publish --variants``,
hand-written ``variant.json`` files in real wheels, and one installed by pip into a real venv."""

from __future__ import annotations

import json
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archwheel.binary.scan.inputs import scan_installed
from archwheel.doctor.diagnose import diagnose
from archwheel.effects.host import GpuInfo, GpuProbeResult, PythonEnvironment, TorchInfo
from archwheel.facts.versions import ComputeCapability, DriverVersion
from archwheel.matrix.variant_wheel import write_variant_wheel
from tests.support.cli import CliRun
from tests.support.index_wheels import device_library, make_dist
from tests.support.schemas import audit_schema
from tests.support.variant_wheels import TAGS, arch_wheels
from tests.support.venvs import make_venv, pip_install

SCHEMA = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json"


def claim(label: str, *sm_arch: str, bound: str = "13.0") -> bytes:
    """A ``variant.json`` as another tool (or a hand) writes it: one label, NVIDIA claims."""
    nvidia = {"sm_arch": list(sm_arch), "cuda_version_lower_bound": [bound]}
    return json.dumps({"$schema": SCHEMA, "variants": {label: {"nvidia": nvidia}}}).encode()


def anyones(folder: Path, label: str, variant_json: bytes, *, plain_name: bool = False) -> Path:
    """A real wheel whose library holds only sm_80 SASS, with ``variant_json`` (not archwheel's
    derivation) in its dist-info; ``plain_name``: under the plain file name, without the label."""
    wheel = make_dist(folder / "plain", "vext", "1.0", libraries={"_k.so": device_library(80)})
    made = write_variant_wheel(wheel, label, variant_json, folder)
    if not plain_name:
        return made
    return made.rename(folder / wheel.name)


def can_run_schema() -> dict[str, Any]:
    text = resources.files("archwheel.interfaces").joinpath("schema/can-run.schema.json")
    schema: dict[str, Any] = json.loads(text.read_text())
    return schema


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sm80, sm90 and sm120 wheels ``publish --variants`` wrote, by label."""
    from archwheel.interfaces.cli import main

    root = tmp_path_factory.mktemp("variants")
    per_arch, _ = arch_wheels(root / "wheels", device_library)
    index = root / "index"
    args = ["publish", *map(str, per_arch.values()), "--index", str(index), "--cuda", "13.0"]
    assert main([*args, "--variants"]) == 0
    stem = f"vext-1.0-{TAGS['python_tag']}-{TAGS['abi_tag']}-{TAGS['platform_tag']}"
    wheels = index / "current" / "wheels"
    return {label: wheels / f"{stem}-{label}.whl" for label in ("sm80", "sm90", "sm120")}


# -- audit ---------------------------------------------------------------------------------------


def test_audit_finds_archwheels_own_variant_claims_backed(
    cli_run: CliRun, published: dict[str, Path]
) -> None:
    code, out, err = cli_run("audit", *map(str, published.values()), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, audit_schema())
    checks = [i["variant"] for i in doc["inputs"]]
    assert [c["label"] for c in checks] == ["sm80", "sm90", "sm120"]
    assert all(c["ok"] and c["unbacked"] == [] for c in checks)
    assert checks[2]["claims"] == [
        {"label": "sm120", "sm_arch": ["120_real"], "cuda_version_lower_bound": ["13.0"]}
    ]
    code, out, _ = cli_run("audit", str(published["sm90"]))
    assert code == 0
    assert "variant.json (sm90): every claim is backed by the device code" in out


def test_audit_flags_anyones_claim_of_sm120_on_an_sm80_wheel(
    cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = anyones(tmp_path, "sm80_120", claim("sm80_120", "80_real", "120_real"))
    code, out, err = cli_run("audit", str(wheel))
    assert code == 1, err
    flagged = [line for line in out.splitlines() if line.startswith("unbacked variant claim")]
    assert flagged == [
        "unbacked variant claim: sm80_120: sm_arch 120_real without SASS sm_120 in every module "
        "with device code"
    ]
    assert "verdict: FAIL: 1 variant.json claims the device code does not back" in out
    code, out, _ = cli_run("audit", str(wheel), "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, audit_schema())
    assert code == 1 and doc["exit_code"] == 1 and doc["ok"] is False
    (entry,) = doc["inputs"]
    assert entry["ok"] is False and entry["variant"]["ok"] is False
    assert entry["variant"]["member"] == "vext-1.0.dist-info/variant.json"
    assert entry["variant"]["claims"][0]["sm_arch"] == ["80_real", "120_real"]
    code, out, _ = cli_run("audit", str(wheel), "--quiet")
    assert code == 1 and "120_real" in out
    code, out, _ = cli_run("audit", str(wheel), "--format", "markdown")
    assert code == 1 and "- unbacked variant claim: sm80" in out
    code, out, _ = cli_run("audit", str(wheel), "--format", "html")
    assert code == 1 and "variant.json claims what the device code lacks" in out
    assert "unbacked variant claim: sm80_120: sm_arch 120_real" in out


def test_audit_with_expect_met_still_fails_on_an_unbacked_claim(
    cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = anyones(tmp_path, "sm90", claim("sm90", "90_real"))
    code, out, _ = cli_run("audit", str(wheel), "--expect", "8.0")
    assert code == 1
    assert "sm90: sm_arch 90_real without SASS sm_90" in out


def test_audit_judges_every_label_of_a_plain_named_wheel(cli_run: CliRun, tmp_path: Path) -> None:
    wheel = anyones(tmp_path, "sm80", claim("sm80", "80_real", "80_virtual"), plain_name=True)
    assert "-sm80" not in wheel.name
    code, out, _ = cli_run("audit", str(wheel), "--format", "json")
    assert code == 1
    variant = json.loads(out)["inputs"][0]["variant"]
    assert variant["label"] is None
    assert variant["unbacked"] == [
        "sm80: sm_arch 80_virtual without PTX compute_80 in every module with device code"
    ]


def test_audit_flags_a_file_name_label_its_variant_json_lacks(
    cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = anyones(tmp_path, "sm80", claim("other", "80_real"))
    code, out, _ = cli_run("audit", str(wheel))
    assert code == 1
    assert "sm80: the file name's label is not in its variant.json (other)" in out


@pytest.mark.parametrize(
    ("variant_json", "said"),
    [
        (b"{not json", "variant.json: not JSON"),
        (b" " * ((1 << 20) + 1), "variant.json: larger than 1048576 bytes"),
        (b'{"variants": []}', "variant.json has no 'variants' object"),
        (claim("sm80", "80_real", bound="soon"), "cuda_version_lower_bound 'soon' is no version"),
        (claim("sm80", "80_real", "sm_120"), "sm_arch 'sm_120' names no image"),
    ],
)
def test_audit_says_in_one_line_why_a_variant_json_cannot_be_believed(
    cli_run: CliRun, tmp_path: Path, variant_json: bytes, said: str
) -> None:
    wheel = anyones(tmp_path, "sm80", variant_json)
    code, out, err = cli_run("audit", str(wheel))
    assert code == 1, err
    assert said in out
    assert "Traceback" not in out + err


def test_audit_of_a_wheel_without_variant_json_has_no_variant_entry(
    cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = make_dist(tmp_path, "vext", "1.0", libraries={"_k.so": device_library(80)})
    code, out, _ = cli_run("audit", str(wheel), "--format", "json")
    assert code == 0
    assert "variant" not in json.loads(out)["inputs"][0]


# -- can-run -------------------------------------------------------------------------------------


def test_can_run_exits_13_on_an_unbacked_claim_and_11_wins(
    cli_run: CliRun, tmp_path: Path, published: dict[str, Path]
) -> None:
    wheel = anyones(tmp_path, "sm80_120", claim("sm80_120", "80_real", "120_real"))
    code, out, _ = cli_run("can-run", str(wheel), "--cc", "8.0", "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, can_run_schema())
    assert code == 13 and doc["exit_code"] == 13 and doc["verdict"] == "native"
    assert doc["inputs"][0]["variant"]["unbacked"] == [
        "sm80_120: sm_arch 120_real without SASS sm_120 in every module with device code"
    ]
    code, out, _ = cli_run("can-run", str(wheel), "--cc", "8.0")
    assert code == 13
    assert "unbacked variant claim: sm80_120: sm_arch 120_real" in out
    assert "1 variant.json claims the device code does not back (exit 13)" in out
    code, out, _ = cli_run("can-run", str(wheel), "--cc", "8.0", "--format", "markdown")
    assert code == 13 and "unbacked variant claim" in out
    # An RTX 5090 gets no kernel image from it: 11 is the more severe verdict.
    assert cli_run("can-run", str(wheel), "--cc", "12.0")[0] == 11
    # archwheel's own variant wheel: its claim is backed, the verdict is the GPU's alone.
    code, out, _ = cli_run("can-run", str(published["sm80"]), "--cc", "8.0")
    assert code == 0
    assert "variant.json (sm80): every claim is backed by the device code" in out


# -- doctor and installed distributions ----------------------------------------------------------


@pytest.fixture(scope="module")
def venv_with_lying_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv where pip installed a "torch" (sm_80 SASS only) whose variant.json claims
    sm_120 too; its interpreter."""
    root = tmp_path_factory.mktemp("installed")
    plain = make_dist(root / "plain", "torch", "2.14.1", platform_tag="linux_x86_64",
                      libraries={"lib/libtorch_k.so": device_library(80)})  # fmt: skip
    (root / "labelled").mkdir()
    labelled = write_variant_wheel(
        plain, "sm80_120", claim("sm80_120", "80_real", "120_real"), root / "labelled"
    )
    wheel = shutil.copy(labelled, root / plain.name)  # pip reads no label in a file name
    python = make_venv(root / "venv")
    pip_install(python, "--no-deps", "--no-index", str(wheel), offline=True)
    return python


def test_audit_installed_reads_the_dist_info_variant_json(
    cli_run: CliRun, venv_with_lying_torch: Path
) -> None:
    args = ["audit", "--installed", "torch", "--interpreter", str(venv_with_lying_torch)]
    code, out, _ = cli_run(*args, "--format", "json")
    assert code == 1
    variant = json.loads(out)["inputs"][0]["variant"]
    assert variant["member"].endswith("torch-2.14.1.dist-info/variant.json")
    assert variant["unbacked"] == [
        "sm80_120: sm_arch 120_real without SASS sm_120 in every module with device code"
    ]


def test_doctor_flags_the_installed_torchs_unbacked_claim(venv_with_lying_torch: Path) -> None:
    host = GpuProbeResult(
        "nvidia-smi",
        (GpuInfo(0, "NVIDIA A100-SXM4-80GB", ComputeCapability.parse("8.0"), "580.65.06"),),
        DriverVersion.parse("580.65.06"),
        None,
        None,
    )
    torch = TorchInfo(installed=True, version="2.14.1", cuda="13.0", cuda_available=True)
    environment = PythonEnvironment(str(venv_with_lying_torch), "3", torch=torch)
    report = diagnose(host, environment, scanner=scan_installed)
    (a100,) = report.diagnoses
    assert a100.verdict is not None and a100.verdict.value == "native"
    assert report.exit_code == 13
    assert (
        "torch's variant.json claims what its device code does not back: sm80_120: sm_arch "
        "120_real without SASS sm_120 in every module with device code"
    ) in report.findings
    summary = report.to_json_dict()["audit"]
    assert summary["variant"]["ok"] is False


def test_doctor_without_variant_json_is_unchanged() -> None:
    from tests.support.inventory_builders import torch_2_14_1_cu130

    host = GpuProbeResult(
        "nvidia-smi",
        (GpuInfo(0, "RTX 5090", ComputeCapability.parse("12.0"), "580.65.06"),),
        DriverVersion.parse("580.65.06"),
        None,
        None,
    )
    torch = TorchInfo(installed=True, version="2.14.1+cu130", cuda="13.0", cuda_available=True)
    report = diagnose(host, PythonEnvironment(sys.executable, "3", torch=torch),
                      scanner=lambda name, python: torch_2_14_1_cu130())  # fmt: skip
    assert report.variant is None and report.exit_code == 0
    assert "variant" not in report.to_json_dict()["audit"]
