"""Audit speed and memory on the real torch 2.14.1+cu130 wheel, against two baselines.

Measured in one run, on this machine:
- baseline 1: Python's zlib inflating the wheel's ELF members, one after the other, and
  nothing else (the least any tool that reads the wheel must do);
- baseline 2: `unzip` of the wheel to disk plus NVIDIA's `cuobjdump -all -lelf -lptx` on each
  ELF file in it (what users do today);
- archwheel: `archwheel audit WHEEL --format json` in a fresh process (wall time, and peak RSS
  of its whole process tree: main process plus scan workers, sampled every 50 ms).

Targets (issue 2): archwheel <= 1.5x baseline 1, >= 10x faster than baseline 2, peak RSS below
300 MB. Prints the ratios and writes them to $ARCHWHEEL_CACHE/bench/audit.json.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
WHEEL_SPEC = "torch==2.14.1"


def fetch_wheel() -> Path:
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob("torch-2.14.1*.whl"))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "-d", str(dest), WHEEL_SPEC],
            check=True,
        )  # fmt: skip
        found = sorted(dest.glob("torch-2.14.1*.whl"))
    return found[-1]


def elf_members(wheel: Path) -> list[zipfile.ZipInfo]:
    """Members whose first bytes are the ELF magic (found by content, not by name)."""
    out = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.file_size < 64:
                continue
            with zf.open(info) as fh:
                if fh.read(4) == b"\x7fELF":
                    out.append(info)
    return out


def inflate_only(wheel: Path, members: list[zipfile.ZipInfo]) -> float:
    start = time.perf_counter()
    with wheel.open("rb") as fh:
        for info in members:
            fh.seek(info.header_offset)
            header = fh.read(30)
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            fh.seek(info.header_offset + 30 + name_len + extra_len)
            inflater = zlib.decompressobj(-15)
            remaining = info.compress_size
            while remaining:
                block = fh.read(min(remaining, 1 << 20))
                remaining -= len(block)
                inflater.decompress(block)
            inflater.flush()
    return time.perf_counter() - start


def _tree_rss_kib(root: int) -> int:
    """Resident memory of a process and all its descendants, from /proc."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            parents[int(entry.name)] = int(fields[1])
            rss[int(entry.name)] = int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, IndexError, ValueError):
            continue
    tree = {root}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                changed = True
    return sum(rss.get(pid, 0) for pid in tree)


def run_measured(argv: list[str]) -> tuple[float, int, int]:
    """Wall time, peak RSS in KiB of the whole process tree (sampled), and the exit code.

    The peak is the larger of the sampled tree total and the kernel's own high-water mark of
    the main process (which catches spikes between samples).
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _tree_rss_kib(proc.pid))
        time.sleep(0.05)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, max(peak, usage.ru_maxrss), proc.returncode


def find_cuobjdump() -> Path | None:
    on_path = shutil.which("cuobjdump")
    if on_path:
        return Path(on_path)
    for site in map(Path, sys.path):
        candidate = site / "nvidia" / "cu13" / "bin" / "cuobjdump"
        if candidate.is_file():
            return candidate
    return None


def unzip_and_cuobjdump(
    wheel: Path, members: list[zipfile.ZipInfo], tool: Path
) -> tuple[float, int]:
    """What users do today: unzip the wheel, then cuobjdump every ELF file in it.

    The whole wheel is unzipped (a user does not know in advance which members are binaries);
    cuobjdump then runs on the ELF members (found by content).
    """
    unzip = shutil.which("unzip")
    if not unzip:
        raise SystemExit(
            "bench_audit: `unzip` is needed for the cuobjdump baseline (apt-get install unzip)"
        )
    peak = 0
    with tempfile.TemporaryDirectory(prefix="archwheel-bench-") as tmp:
        start = time.perf_counter()
        subprocess.run([unzip, "-q", "-o", str(wheel), "-d", tmp], check=True)
        for m in members:
            _, rss, _ = run_measured(
                [str(tool), "-all", "-lelf", "-lptx", str(Path(tmp) / m.filename)]
            )
            peak = max(peak, rss)
        return time.perf_counter() - start, peak


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    repeats = 1 if quick else 2
    wheel = fetch_wheel()
    members = elf_members(wheel)
    inflated = sum(m.file_size for m in members)
    print(f"wheel: {wheel.name}, {len(members)} ELF members, {inflated / 2**20:.0f} MiB inflated")
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")

    base = min(inflate_only(wheel, members) for _ in range(repeats))
    print(f"baseline 1, zlib inflate of the ELF members: {base:.2f} s")

    audit_cmd = [sys.executable, "-m", "archwheel.interfaces.cli", "audit", str(wheel),
                 "--format", "json", "-o", os.devnull]  # fmt: skip
    runs = [run_measured(audit_cmd) for _ in range(repeats)]
    for _, _, code in runs:
        if code not in (0, 1):
            print(f"archwheel audit failed with exit code {code}", file=sys.stderr)
            return 1
    audit_time = min(r[0] for r in runs)
    audit_rss = max(r[1] for r in runs) / 1024
    print(f"archwheel audit: {audit_time:.2f} s, peak RSS {audit_rss:.0f} MB")

    results: dict[str, float | int | str | None] = {
        "wheel": wheel.name,
        "inflate_s": round(base, 3),
        "audit_s": round(audit_time, 3),
        "audit_peak_rss_mb": round(audit_rss),
        "ratio_audit_over_inflate": round(audit_time / base, 3),
        "load_average": round(os.getloadavg()[0], 2),
    }
    failures = []
    if audit_time / base > 1.5:
        failures.append(f"audit/inflate = {audit_time / base:.2f} > 1.5")
    if audit_rss >= 300:
        failures.append(f"peak RSS {audit_rss:.0f} MB >= 300 MB")

    tool = find_cuobjdump()
    if quick:
        print("cuobjdump baseline skipped (--quick)")
    elif tool is None:
        print("cuobjdump not found (pip install nvidia-cuda-cuobjdump): baseline 2 skipped")
        failures.append("cuobjdump baseline missing")
    else:
        co_time, co_rss = unzip_and_cuobjdump(wheel, members, tool)
        results.update(
            cuobjdump_s=round(co_time, 3),
            cuobjdump_peak_rss_mb=round(co_rss / 1024),
            speedup_vs_cuobjdump=round(co_time / audit_time, 2),
        )
        print(f"baseline 2, unzip + cuobjdump: {co_time:.2f} s, peak RSS {co_rss / 1024:.0f} MB")
        if co_time / audit_time < 10:
            failures.append(f"speed-up over cuobjdump {co_time / audit_time:.1f}x < 10x")

    print()
    print(f"ratio  audit / zlib inflate     = {audit_time / base:5.2f}   (target <= 1.5)")
    if "speedup_vs_cuobjdump" in results:
        speedup = results["speedup_vs_cuobjdump"]
        print(f"ratio  unzip+cuobjdump / audit = {speedup:5.1f}   (target >= 10)")
    print(f"peak RSS of the audit          = {audit_rss:5.0f} MB (target < 300)")
    out = CACHE / "bench" / "audit.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {out}")
    for f in failures:
        print(f"TARGET MISSED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
