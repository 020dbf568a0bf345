"""can-load on the real torch and torchvision wheels, checked against the real import."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.can_load_fakes import (
    _gxx,
    make_wheel,
    validate_schema,
)
from tests.support.cli import CliRun
from tests.support.components import fetch_wheel
from tests.support.real_import import check_against_import, package_loads
from tests.support.venvs import TORCH_CU12_SPEC

# The CPU build of torch 2.13.0 (no libc10_cuda.so / libtorch_cuda.so); "torch==2.13.0" is the
# CUDA 13.0 build (fetch_wheel is exact).
TORCH_CPU = "torch==2.13.0+cpu"


@pytest.mark.realwheel
@pytest.mark.slow
def test_torchvision_against_torch_2_14_1(
    torchvision_wheel: Path, torch_wheel: Path, cli_run: CliRun
) -> None:
    code, out, err = cli_run(
        "can-load", str(torchvision_wheel), "--with", str(torch_wheel), "--format", "json"
    )
    assert code == 0, out + err
    doc = json.loads(out)
    validate_schema(doc, "can-load")
    libs = {lib["path"]: lib for lib in doc["libraries"]}
    stable = libs["torchvision/_C_stable.so"]
    assert stable["verdict"] == "loads"
    assert stable["symbols_checked"] > 100
    assert any("torch>=2.14.0" in f and "satisfied" in f for f in doc["facts"])
    assert "libcudart.so.13" in doc["assumed_loaded_by_torch"]
    assert "libnccl.so.2" in doc["assumed_loaded_by_torch"]
    # an nvidia-* wheel given with --with is laid out under site-packages/nvidia/, where torch's
    # RPATH ($ORIGIN/../../nvidia/nccl/lib) finds it: its library is no longer assumed
    nccl = fetch_wheel("nvidia-nccl-cu13==2.30.7")
    code, out, err = cli_run(
        "can-load", str(torchvision_wheel), "--with", str(torch_wheel), "--with", str(nccl),
        "--format", "json",
    )  # fmt: skip
    assert code == 0, out + err
    assert "libnccl.so.2" not in json.loads(out)["assumed_loaded_by_torch"]


@pytest.mark.realwheel
@pytest.mark.slow
def test_torchvision_against_cpu_torch_2_13_0(torchvision_wheel: Path, cli_run: CliRun) -> None:
    torch_cpu = fetch_wheel(TORCH_CPU)
    code, out, err = cli_run(
        "can-load", str(torchvision_wheel), "--with", str(torch_cpu), "--format", "json"
    )
    assert code == 1, out + err
    doc = json.loads(out)
    stable = next(lib for lib in doc["libraries"] if lib["path"] == "torchvision/_C_stable.so")
    assert stable["verdict"] == "does-not-load"
    assert {"libc10_cuda.so", "libtorch_cuda.so"} <= set(stable["missing_libraries"])
    assert any("CPU-only torch" in c for c in stable["causes"])
    # the stable C ABI symbols torch 2.13.0's CPU libraries hold do resolve
    assert stable["missing_symbols"] == []
    assert doc["metadata_conflicts"] and "torch>=2.14.0" in doc["metadata_conflicts"][0]


@pytest.mark.realwheel
@pytest.mark.slow
@pytest.mark.parametrize("vision", ["0.29.1", "0.28.0"])
def test_torchvision_verdict_is_what_import_does_with_2_14_1(
    vision: str, torch_venv: Path, torch_wheel: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = fetch_wheel(f"torchvision=={vision}")
    doc = check_against_import(cli_run, torch_venv, wheel, torch_wheel, tmp_path)
    if vision == "0.28.0":  # built against torch 2.13.0 with the ordinary C++ API
        assert doc["verdict"] == "does-not-load"
        assert any("torch==2.13.0" in c for c in doc["metadata_conflicts"])  # type: ignore[attr-defined]
    else:  # the stable C ABI
        assert doc["verdict"] == "loads"


@pytest.mark.realwheel
@pytest.mark.slow
@pytest.mark.parametrize("vision", ["0.29.1", "0.28.0"])
def test_torchvision_verdict_is_what_import_does_with_2_13_0_cpu(
    vision: str, torch_cpu_venv: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = fetch_wheel(f"torchvision=={vision}")
    doc = check_against_import(cli_run, torch_cpu_venv, wheel, fetch_wheel(TORCH_CPU), tmp_path)
    assert doc["verdict"] == "does-not-load"


@pytest.mark.realwheel
@pytest.mark.slow
def test_installed_environment(torch_venv: Path, cli_run: CliRun) -> None:
    """--installed reads torch and its nvidia-* packages from the environment: nothing is
    assumed, and the verdicts are those the import gives (test above)."""
    code, out, err = cli_run(
        "can-load", str(fetch_wheel("torchvision==0.29.1")), "--installed",
        "--interpreter", str(torch_venv), "--format", "json",
    )  # fmt: skip
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["assumed_loaded_by_torch"] == []
    code, out, err = cli_run(
        "can-load", str(fetch_wheel("torchvision==0.28.0")), "--installed",
        "--interpreter", str(torch_venv),
    )  # fmt: skip
    assert code == 1, out + err
    assert "c10_cuda_check_implementation" in out


TWICE = """\
#include <torch/torch.h>

struct Twice : public torch::autograd::Function<Twice> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, torch::Tensor x) {
    return x * 2;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grad) {
    return {grad[0] * 2};
  }
};

extern "C" double twice_sum(int n) {
  auto x = torch::ones({n}, torch::requires_grad());
  return Twice::apply(x).sum().item<double>();
}
"""


@pytest.mark.realwheel
@pytest.mark.slow
def test_cpp_api_extension_built_against_2_14_1(
    torch_venv: Path, torch_cpu_venv: Path, torch_wheel: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    """An extension on torch's ordinary C++ API (a custom autograd Function), compiled with g++
    against torch 2.14.1's own headers and libraries: loads with 2.14.1, not with 2.13.0, and
    the verdict names the two torch::autograd functions 2.13.0 lacks."""
    site = next((torch_venv.parent.parent / "lib").glob("python3*/site-packages"))
    source = tmp_path / "twice.cc"
    source.write_text(TWICE)
    library = tmp_path / "libtwice.so"
    subprocess.run(
        [_gxx(), "-shared", "-fPIC", "-O0", "-std=c++20", f"-I{site}/torch/include",
         f"-I{site}/torch/include/torch/csrc/api/include", str(source), "-o", str(library),
         f"-L{site}/torch/lib", "-Wl,--no-as-needed", "-lc10", "-ltorch_cpu", "-ltorch"],
        check=True, capture_output=True, timeout=900,
    )  # fmt: skip
    (tmp_path / "w").mkdir()
    # built with this host's g++ (newer libstdc++ than manylinux_2_28 allows): a plain linux tag
    wheel = make_wheel(
        tmp_path / "w", "twice", "1.0", {"twice/libtwice.so": library},
        tag="cp311-cp311-linux_x86_64",
    )  # fmt: skip
    loads = check_against_import(cli_run, torch_venv, wheel, torch_wheel, tmp_path / "a")
    assert loads["verdict"] == "loads"
    old = check_against_import(
        cli_run, torch_cpu_venv, wheel, fetch_wheel(TORCH_CPU), tmp_path / "b"
    )
    assert old["verdict"] == "does-not-load"
    code, out, _err = cli_run(
        "can-load", str(wheel), "--with", str(fetch_wheel(TORCH_CPU)), "--format", "json"
    )
    (lib,) = json.loads(out)["libraries"]
    names = sorted(s.get("demangled", s["name"]).split("(")[0] for s in lib["missing_symbols"])
    if shutil.which("c++filt"):
        assert names == [
            "torch::autograd::_wrap_outputs",
            "torch::autograd::fire_node_creation_hooks",
        ]
    assert any("another torch version" in c for c in lib["causes"])


# torchaudio loads its own libraries itself: torchaudio/_extension/__init__.py calls
# _load_lib("libtorchaudio") (torch.ops.load_library) before importing torchaudio.lib._torchaudio,
# and models/decoder/_cuda_ctc_decoder.py loads libctc_prefix_decoder before pybind11_prefixctc.
TORCHAUDIO_STEPS = [
    ("torchaudio/lib/libtorchaudio.so", "load_library"),
    ("torchaudio/lib/_torchaudio.so", "module"),
    ("torchaudio/lib/libctc_prefix_decoder.so", "load_library"),
    ("torchaudio/lib/pybind11_prefixctc.so", "module"),
]


@pytest.mark.realwheel
@pytest.mark.slow
def test_torchaudio_against_the_torch_it_declares_and_another(
    torch_cu12_venv: Path, torch_venv: Path, torch_wheel: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    """torchaudio 2.9.1 (a third-party binary wheel on torch's C++ API, Requires-Dist
    torch==2.9.1): against torch 2.9.1 (CUDA 12.8) and against 2.14.1 (CUDA 13.0); each verdict
    is what loading the libraries in the package's own order, and `import torchaudio`, do."""
    wheel = fetch_wheel("torchaudio==2.9.1")
    cases = [
        (torch_cu12_venv, fetch_wheel(TORCH_CU12_SPEC), "loads"),
        (torch_venv, torch_wheel, "does-not-load"),
    ]
    for n, (python, torch, expected) in enumerate(cases):
        code, out, err = cli_run("can-load", str(wheel), "--with", str(torch), "--format", "json")
        assert code in (0, 1), out + err
        doc = json.loads(out)
        validate_schema(doc, "can-load")
        verdicts = {lib["path"]: lib for lib in doc["libraries"]}
        real, (imported, message) = package_loads(
            python, wheel, tmp_path / str(n), TORCHAUDIO_STEPS, "torchaudio"
        )
        for member, (opened, why) in real.items():
            lib = verdicts[member]
            assert (lib["verdict"] == "loads") == opened, (member, lib, why)
            if not opened:
                # a package library whose own load failed is not loaded: the loader names it
                package = [r["name"] for r in lib["needed"] if r["how"] == "package"]
                named = [
                    *lib["missing_libraries"],
                    *(s["name"] for s in lib["missing_symbols"]),
                    *package,
                ]
                assert any(x in why for x in named), (why, named)
        assert imported == (doc["verdict"] == "loads"), message
        assert doc["verdict"] == expected, doc
        # _torchaudio.so needs libtorchaudio.so by soname, off its search path: the package's own
        stable = verdicts["torchaudio/lib/_torchaudio.so"]
        (row,) = [r for r in stable["needed"] if r["name"] == "libtorchaudio.so"]
        assert row["how"] == "package"
    # against 2.14.1: a CUDA 12 build next to a CUDA 13 torch, and three c10 symbols gone
    lib = verdicts["torchaudio/lib/libtorchaudio.so"]
    assert "libcudart.so.12" in lib["missing_libraries"]
    assert any("CUDA major mismatch" in c for c in lib["causes"])
    assert any("torch==2.9.1" in c for c in doc["metadata_conflicts"])
