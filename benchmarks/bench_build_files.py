"""The build-file proof on PyTorch 2.6.0's configured build.ninja (8.4 MB, 2,462 statements,
341 CUDA steps; tests/support/data/pytorch-2.6.0-cuda).

Baseline, in the same run: reading the same bytes and splitting them into lines (the least any
reader of the file does). Measured: the reader (ninja's scopes and escapes, every command that
names nvcc split into words) and the proof against "8.0;9.0". Target: under 1 s; the ratio to
the baseline is reported (16x measured on a loaded 2-core machine: one pass, linear in the
text). Prints the figures and writes them to ``$ARCHWHEEL_CACHE/bench/build_files.json``.
"""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
DATA = ROOT / "tests" / "support" / "data" / "pytorch-2.6.0-cuda" / "configured.tar.xz"
TARGET_SECONDS = 1.0


def _best(call, rounds: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str]) -> int:
    from archwheel.facts.arch import ArchList
    from archwheel.inspection.build_files import prove_build_files

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        with tarfile.open(DATA) as archive:
            archive.extractall(root, filter="data")
        ninja = root / "build" / "build.ninja"
        arch = ArchList.parse("8.0;9.0")
        proof = prove_build_files(root / "build", arch)
        assert (proof.cuda_steps, proof.exact, proof.with_additions) == (341, 339, 2)
        baseline = _best(lambda: ninja.read_bytes().decode().split("\n"))
        measured = _best(lambda: prove_build_files(root / "build", arch))
    ratio = measured / baseline
    print(f"baseline (read + split lines): {baseline * 1000:.1f} ms")
    print(
        f"build-files proof (read, expand, split nvcc commands, judge): {measured * 1000:.1f} ms"
        f" = {ratio:.1f}x the baseline (target: < {TARGET_SECONDS} s)"
    )
    out = CACHE / "bench" / "build_files.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"baseline_s": baseline, "proof_s": measured, "ratio": ratio}))
    return 0 if measured < TARGET_SECONDS else 1
