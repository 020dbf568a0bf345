"""The package index going away in the middle of the toolkit download (issue 29).

The host-side ``pip download`` of a CUDA toolkit's component wheels (``download_toolchain``, the
first step of making a builder image) against a real HTTP server on 127.0.0.1 that serves a PEP
503 page for a real NVIDIA wheel (nvidia-cuda-cupti 13.0.85, about 11 MB, fetched from the index
pip is configured with) and ends every connection after half the file. What must hold: one
``ToolError`` line naming the toolkit and pip's reason, within a bounded time; no wheel (whole
or partial) in the destination; with the index back, the same call gets the real file.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import ToolError
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.builder_image import download_toolchain
from archwheel.wheelbuild.recipe_model import ToolchainSpec
from archwheel.wheelbuild.toolkit import manylinux_platforms
from tests.support.paths import CACHE
from tests.support.range_server import range_server, simple_index

pytestmark = [pytest.mark.faults, pytest.mark.realwheel, pytest.mark.slow]

SPEC = "nvidia-cuda-cupti==13.0.85"
TOOLCHAIN = ToolchainSpec(
    CudaVersion(13, 0), "archwheel/debian:bookworm", "pypi", pypi_packages=(SPEC,),
    pypi_prefix="nvidia/cu13", cudart_soname="libcudart.so.13",
)  # fmt: skip
PLATFORMS = manylinux_platforms((2, 36))


@pytest.fixture(scope="module")
def cupti_wheel() -> Path:
    folder = CACHE / "toolchain-fault-wheels"
    found = sorted(folder.glob("nvidia_cuda_cupti-13.0.85-*.whl"))
    if not found:
        download_toolchain(TOOLCHAIN, "3.11", folder, PipSettings.from_host(), None,
                           platforms=PLATFORMS)  # fmt: skip
        found = sorted(folder.glob("nvidia_cuda_cupti-13.0.85-*.whl"))
    assert len(found) == 1, found
    return found[0]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_index_that_goes_away_mid_download_fails_in_one_line_and_leaves_no_wheel(
    cupti_wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip reads this machine's configuration too (its mirrors as extra indexes, find-links):
    # only the test's index may answer, or the fault would be bypassed
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in [n for n in os.environ if n.startswith("PIP_") and n != "PIP_CONFIG_FILE"]:
        monkeypatch.delenv(name)
    served = tmp_path / "served"
    served.mkdir()
    with range_server(served) as server:
        cut = simple_index(served, "nvidia-cuda-cupti", [cupti_wheel], mode="cut")
        whole = simple_index(served, "nvidia-cuda-cupti", [cupti_wheel], mode="files")
        dest = tmp_path / "dest"
        dest.mkdir()
        mark = time.monotonic()
        with pytest.raises(ToolError) as raised:
            download_toolchain(TOOLCHAIN, "3.11", dest, PipSettings(index_url=server.url + cut),
                               None, platforms=PLATFORMS)  # fmt: skip
        seconds = time.monotonic() - mark
        message = raised.value.message
        assert "\n" not in message
        assert message.startswith("pip could not download the CUDA 13.0 toolchain wheels: ")
        assert server.requests["cut"] >= 1
        assert list(dest.iterdir()) == []  # nothing half-downloaded where the image build looks
        assert seconds < 300, seconds  # bounded: pip's retries, not a hang
        print(f"cut mid-download: {seconds:.1f} s, {server.requests['cut']} attempts: {message}")
        # the index back: the same call gets the real wheel
        download_toolchain(TOOLCHAIN, "3.11", dest, PipSettings(index_url=server.url + whole),
                           None, platforms=PLATFORMS)  # fmt: skip
    (got,) = dest.glob("*.whl")
    assert got.name == cupti_wheel.name and _sha(got) == _sha(cupti_wheel)
