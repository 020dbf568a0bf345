"""The compiler cache shared between machines, on a real Redis server.

Each build runs in fresh builder containers with its own empty local cache volume and its own
work folder, as two machines would; they share only the Redis server (Debian's redis-server on
127.0.0.1, started here), reached through archwheel's relay socket while the compile keeps
``--network none``. The speed ratio is measured by ``nox -s bench -- matrix``, not asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.redis_server import RedisServer, free_port, redis_server

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
EXAMPLE = ROOT / "recipes" / "example.toml"

pytestmark = [pytest.mark.docker, pytest.mark.nvcc, pytest.mark.slow]


@dataclass
class Machines:
    server: RedisServer
    env: dict[str, str]
    volumes: list[str] = field(default_factory=list)

    def build(self, out: Path, *args: str, url: str | None = None) -> tuple[dict[str, object], str]:
        """``archwheel build`` with a new empty local cache volume; JSON result and stderr."""
        volume = f"archwheel-test-rcache-{uuid.uuid4().hex[:8]}"
        self.volumes.append(volume)
        command = [
            *CLI, "build", "--out", str(out), "--ccache-volume", volume,
            "--cache-url", url or self.server.url, "--format", "json", "--quiet", *args,
        ]  # fmt: skip
        proc = subprocess.run(command, env=self.env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout), proc.stderr


@pytest.fixture(scope="module")
def machines(docker_engine: str) -> Iterator[Machines]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    env.pop("ARCHWHEEL_CACHE_URL", None)
    made = subprocess.run(
        [*CLI, "base-image"], env=env, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr[-2000:]
    with redis_server() as server:
        found = Machines(server, env)
        yield found
        subprocess.run(
            ["docker", "volume", "rm", "--force", *found.volumes], capture_output=True, check=False
        )


def counts(result: dict[str, object]) -> dict[str, int]:
    cache = result["compiler_cache"]
    assert isinstance(cache, dict)
    return {k: int(v) for k, v in cache.items()}


def provenance(result: dict[str, object]) -> dict[str, object]:
    document = json.loads(Path(str(result["provenance"])).read_text())
    assert isinstance(document, dict)
    return document


def example_with_env(tmp_path: Path, line: str) -> Path:
    """The example recipe with one more [build.env] line (its source path made absolute)."""
    text = EXAMPLE.read_text().replace(
        'path = "../examples/cuda-kernels"', f'path = "{ROOT / "examples" / "cuda-kernels"}"'
    )
    text = text.replace("[build.env]\n", f"[build.env]\n{line}\n", 1)
    path = tmp_path / "example-flagged.toml"
    path.write_text(text)
    return path


def test_second_machine_compiles_from_the_server(machines: Machines, tmp_path: Path) -> None:
    first, _ = machines.build(tmp_path / "one", "--recipe", "example", "--arch", "8.0;9.0")
    cold = counts(first)
    assert cold["misses"] > 0 and cold["remote_hits"] == 0 and cold["fallbacks"] == 0
    second, _ = machines.build(tmp_path / "two", "--recipe", "example", "--arch", "8.0;9.0")
    warm = counts(second)
    # Each of the example's 7 nvcc calls is answered whole from the server (the whole-call
    # cache, through the relay), so sccache is asked for no step.
    compiles = warm["local_hits"] + warm["remote_hits"] + warm["misses"]
    assert warm["whole_call_hits"] == 7 and compiles == 0, warm
    assert second["sha256"] == first["sha256"]  # byte-identical wheels
    assert Path(str(second["wheel"])).read_bytes() == Path(str(first["wheel"])).read_bytes()
    recorded = provenance(second)["compiler_cache"]
    assert isinstance(recorded, dict)
    assert recorded["whole_call"] == {"hits": 7, "stored": 0}
    assert recorded["remote"]["used"] is True
    assert provenance(second)["network_during_compile"] is False  # the relay, not the network

    # Another arch list: sccache caches each arch's PTX and CUBIN on its own, and a file
    # without CUB (whose namespaces carry the arch list) may reuse sm_90's; the host objects,
    # which embed the fatbin of the whole list, come from none of the first cell's entries.
    other, _ = machines.build(tmp_path / "three", "--recipe", "example", "--arch", "9.0")
    by_phase = provenance(other)["compiler_cache"]["by_phase"]  # type: ignore[index]
    assert by_phase["CUDA"]["hits"] == 0 and by_phase["CUDA"]["misses"] == 7, by_phase
    steps = counts(other)["local_hits"] + counts(other)["remote_hits"] + counts(other)["misses"]

    # Same arch list, same sources, NVCC_APPEND_FLAGS in the environment: another key.
    flagged = example_with_env(tmp_path, 'NVCC_APPEND_FLAGS = "-DARCHWHEEL_KEY_PROBE=1"')
    probe, _ = machines.build(tmp_path / "four", "--recipe", str(flagged), "--arch", "9.0")
    assert counts(probe)["remote_hits"] == 0 and counts(probe)["misses"] == steps


def compiles_of(result: dict[str, object]) -> list[tuple[str, str]]:
    """(file, result) of each cached step, from the provenance (the sccache daemon's log)."""
    recorded = provenance(result)["compiler_cache"]
    assert isinstance(recorded, dict)
    return [(c["file"], c["result"]) for c in recorded["compiles"]]


# examples/libtorch-ops: src/csrc/ops.cpp and ops_cuda.cu; sccache names each step's output
# (ops.cpp.o, ops_cuda.compute_90.cubin, ...)
EXTENSION_STEMS = ("ops.", "ops_cuda.")


def test_a_cell_with_another_torch_gets_no_hits_for_its_own_code(
    machines: Machines, tmp_path: Path
) -> None:
    """libtorch-ops against torch 2.14.1, then against 2.13.0 on another machine with the same
    server: the extension's host and device code include the torch headers, so no step whose
    input is the preprocessed source may come from the first cell's entries. A CUBIN step's
    input is its PTX alone: where the other torch's headers give the same PTX, ptxas' output
    is the same and may come from the server (sound: the PTX step itself missed). CMake's own
    compiler probes (CMakeCUDACompilerABI.cu, the same with any torch) do come from the server:
    the server was reachable and shared, and the misses are the key's doing."""
    first, _ = machines.build(tmp_path / "one", "--recipe", "libtorch-ops", "--arch", "9.0")
    other, _ = machines.build(
        tmp_path / "two", "--recipe", "libtorch-ops", "--arch", "9.0", "--torch", "2.13.0"
    )
    for result in (first, other):
        own = [(f, r) for f, r in compiles_of(result) if f.startswith(EXTENSION_STEMS)]
        from_source = [(f, r) for f, r in own if not f.endswith(".cubin")]
        assert from_source and all(r == "miss" for _, r in from_source), own
        ptx = {f.removesuffix(".ptx") for f, r in own if f.endswith(".ptx") and r == "miss"}
        assert all(f.removesuffix(".cubin") in ptx for f, _ in own if f.endswith(".cubin")), own
    hits = [f for f, r in compiles_of(other) if r == "hit"]
    assert not any(f.startswith(EXTENSION_STEMS) and not f.endswith(".cubin") for f in hits), hits
    assert counts(other)["remote_hits"] == len(hits)
    assert other["sha256"] != first["sha256"]


def test_unreachable_server_builds_without_it_and_says_so_once(
    machines: Machines, tmp_path: Path
) -> None:
    closed = f"redis://127.0.0.1:{free_port()}"
    result, stderr = machines.build(
        tmp_path / "out", "--recipe", "example", "--arch", "8.0", url=closed
    )
    said = [line for line in stderr.splitlines() if "is unreachable (" in line]
    assert len(said) == 1, said
    assert "goes on without it" in said[0]
    recorded = provenance(result)["compiler_cache"]
    assert isinstance(recorded, dict)
    assert recorded["remote"]["used"] is False and recorded["remote"]["unreachable"]
    assert recorded["remote_hits"] == 0
    environment = provenance(result)["environment"]
    assert not any(str(name).startswith("SCCACHE_REDIS") for name in environment)  # type: ignore[attr-defined]
