"""`archwheel arch` and `archwheel gpus` end to end: forms, toolkit failures, recommendations."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import CliRun


def test_normalized_forms(cli_run: CliRun) -> None:
    code, out, err = cli_run("arch", "8.0;9.0+PTX", "--cuda", "12.8", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["schema_version"] == 1
    assert doc["canonical"] == "8.0;9.0+PTX"
    assert doc["torch_cuda_arch_list"] == "8.0;9.0+PTX"
    assert doc["cmake_cuda_architectures"] == "80-real;90"
    assert doc["gencode"] == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    ]
    assert doc["cuda"] == "12.8"
    # 8.7 (Jetson Orin) is integrated: sm_80 does not run on it before CUDA 13.2
    assert doc["targets"][0]["runs_natively_on"] == ["8.0", "8.6", "8.8", "8.9"]


@pytest.mark.parametrize(
    ("argv", "served"),
    [
        (("8.0",), ["8.0", "8.6", "8.8", "8.9"]),
        (("8.0", "--cuda", "13.0"), ["8.0", "8.6", "8.8", "8.9"]),
        (("8.6", "--cuda", "13.2"), ["8.6", "8.7", "8.8", "8.9"]),
        (("8.7",), ["8.7"]),
        (("7.0", "--cuda", "12.8"), ["7.0", "7.5"]),
        (("10.0", "--cuda", "12.8"), ["10.0", "10.3", "10.7"]),
        (("10.1", "--cuda", "12.8"), ["10.1", "11.0"]),
    ],
)
def test_arch_names_the_gpus_a_cubin_runs_on(
    cli_run: CliRun, argv: tuple[str, ...], served: list[str]
) -> None:
    code, out, _ = cli_run("arch", *argv, "--format", "json")
    assert code == 0
    assert json.loads(out)["targets"][0]["runs_natively_on"] == served


def test_arch_8_0_no_longer_says_it_runs_on_jetson_orin(cli_run: CliRun) -> None:
    code, out, _ = cli_run("arch", "8.0")
    assert code == 0 and "sm_80" in out and "Orin" not in out
    code, out, _ = cli_run("arch", "8.0", "--cuda", "13.2")
    assert code == 0 and "Jetson Orin" in out


def test_a_desktop_list_does_not_cover_jetson_orin(cli_run: CliRun) -> None:
    code, out, _ = cli_run("arch", "8.0;8.6", "--gpu", "Jetson Orin,A10", "--format", "markdown")
    assert code == 1
    assert "| Jetson Orin (8.7) | none | - | sass-integrated |" in out
    assert "| A10 (8.6) | native | sm_86 | sass-same-major |" in out
    code, out, _ = cli_run(
        "arch", "8.0;8.6", "--gpu", "Jetson Orin", "--cuda", "13.2", "--format", "markdown"
    )
    assert code == 0
    assert "| Jetson Orin (8.7) | native | sm_86 | sass-same-major |" in out


def test_normalized_forms_as_a_table(cli_run: CliRun) -> None:
    code, out, _ = cli_run("arch", "Ampere", "--cuda", "12.8")
    assert code == 0
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert "canonical 8.0;8.6+PTX" in lines
    assert "TORCH_CUDA_ARCH_LIST 8.0;8.6+PTX" in lines
    assert "CMAKE_CUDA_ARCHITECTURES 80-real;86" in lines
    assert "CUDA 12.8 every target can be compiled" in lines


def test_a_form_pytorch_cannot_express_says_why(cli_run: CliRun) -> None:
    code, out, _ = cli_run("arch", "10.0f", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["torch_cuda_arch_list"] is None
    assert doc["torch_cuda_arch_list_error"].startswith(
        "TORCH_CUDA_ARCH_LIST does not accept family-specific targets"
    )
    assert doc["cmake_cuda_architectures"] == "100f-real"


@pytest.mark.parametrize(
    ("archlist", "cuda", "message"),
    [
        ("12.0", "12.6", "sm_120 needs CUDA >= 12.8; this build uses CUDA 12.6"),
        ("7.0", "13.0", "7.0 (Volta) was removed in CUDA 13.0"),
        ("9.9", "12.8", "invalid arch '9.9'"),
        ("8.0", "99.1", "no facts recorded for CUDA 99.1"),
    ],
)
def test_toolkit_and_parse_failures_exit_2_on_one_line(
    cli_run: CliRun, archlist: str, cuda: str, message: str
) -> None:
    code, out, err = cli_run("arch", archlist, "--cuda", cuda)
    assert code == 2
    assert out == ""
    assert err.startswith("archwheel: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_recommendation(cli_run: CliRun) -> None:
    code, out, _ = cli_run(
        "arch", "--gpu", "A100,H100,L4,RTX 5090", "--cuda", "12.8", "--ptx", "--format", "json"
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["arch_list"]["canonical"] == "8.0;9.0;12.0+PTX"
    assert doc["arch_list"]["torch_cuda_arch_list"] == "8.0;9.0;12.0+PTX"
    assert [(c["gpu"]["name"], c["mode"], c["image"]) for c in doc["coverage"]] == [
        ("A100", "native", "sm_80"),
        ("H100", "native", "sm_90"),
        ("L4", "native", "sm_80"),
        ("RTX 5090", "native", "sm_120"),
    ]
    assert doc["problems"] == []


def test_recommendation_table_names_the_list(cli_run: CliRun) -> None:
    code, out, _ = cli_run("arch", "--gpu", "A100,L4", "--cc", "12.0", "--ptx")
    assert code == 0
    assert "Recommended arch list: 8.0;12.0+PTX" in out
    assert "TORCH_CUDA_ARCH_LIST=8.0;12.0+PTX" in out
    assert "PTX for future GPUs: compute_120" in out


def test_recommendation_the_toolkit_cannot_build_exits_2(cli_run: CliRun) -> None:
    code, out, _ = cli_run("arch", "--gpu", "A100,RTX 5090", "--cuda", "12.6")
    assert code == 2
    assert "RTX 5090 (12.0): sm_120 needs CUDA >= 12.8; this build uses CUDA 12.6" in " ".join(
        out.split()
    )


def test_given_list_against_gpus(cli_run: CliRun) -> None:
    code, out, _ = cli_run("arch", "8.0;9.0", "--gpu", "L4,RTX 5090", "--format", "markdown")
    assert code == 1
    assert "| L4 (8.9) | native | sm_80 | sass-same-major |" in out
    assert "| RTX 5090 (12.0) | none | - | no-kernel-image |" in out
    code, _, _ = cli_run("arch", "8.0;9.0+PTX", "--gpu", "L4,RTX 5090")
    assert code == 0  # the 5090 JIT-compiles compute_90


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("arch",), "give an arch list or --gpu/--cc"),
        (("arch", "--gpu", "Voodoo 5"), "unknown GPU 'Voodoo 5'"),
        (("arch", "--cc", "9.9"), "unknown compute capability '9.9'"),
    ],
)
def test_usage_errors(cli_run: CliRun, argv: tuple[str, ...], message: str) -> None:
    code, _, err = cli_run(*argv)
    assert code == 2
    assert message in err


def test_gpu_catalog(cli_run: CliRun) -> None:
    code, out, _ = cli_run("gpus", "--format", "json")
    assert code == 0
    gpus = {g["name"]: g["compute_capability"] for g in json.loads(out)["gpus"]}
    assert gpus["RTX 5090"] == "12.0"
    assert gpus["GB10"] == "12.1"
    code, out, _ = cli_run("gpus")
    assert code == 0
    assert "RTX 5090" in out
