"""Audit speed and memory on the real torch 2.14.1+cu130 wheel, against the limit and baselines.

Measured in one run, on this machine:
- the limit: the wheel's ELF members read, inflated with ISA-L (the fastest inflater at hand,
  the one the audit uses) and CRC-checked, split over as many processes as there are cores
  (2 here) as evenly as their measured times allow, nothing else (what any tool that reads
  every byte of them soundly must do at least); also printed: the same without the CRC;
- baseline 1: Python's zlib inflating the ELF members in one process, nothing else;
- baseline 2: `unzip` of the wheel to disk plus NVIDIA's `cuobjdump -all -lelf -lptx` on each
  ELF file in it (what users do today);
- archwheel: `archwheel audit WHEEL --format json` in a fresh process: its wall time with
  nothing else running, then, in separate runs, the peak memory of its whole process tree
  (main process plus scan workers, sampled every 50 ms: the sampler takes CPU from what it
  measures, so the timed runs are not sampled).

Each time is the best of 3 (``--quick``: of 1). Targets: archwheel <= 1.3x
the limit, >= 10x faster than baseline 2, peak memory below 100 MB (the PSS of its process tree:
the RSS summed over forked processes counts the pages they share once per process; both are
printed). ``--phases`` also prints where
the audit's time goes (imports, directory, each big member's inflate and walk, assembly, JSON);
``--no-cuobjdump`` skips baseline 2 (30 s).
Prints the ratios and writes them to $ARCHWHEEL_CACHE/bench/audit.json.
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
TARGET_LIMIT = 1.3
TARGET_RSS_MB = 100
READ_BLOCK = 1 << 20  # compressed bytes read at a time by the limit
OUT_CAP = 4 << 20  # most inflated bytes per call (the fastest of 1, 4 and 16 MiB, measured)


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


def data_spans(wheel: Path, members: list[zipfile.ZipInfo]) -> list[tuple[int, int, int]]:
    """(data offset, compressed size, CRC) of each member, from its local header."""
    spans = []
    with wheel.open("rb") as fh:
        for info in members:
            fh.seek(info.header_offset)
            name_len, extra_len = struct.unpack("<HH", fh.read(30)[26:30])
            spans.append(
                (info.header_offset + 30 + name_len + extra_len, info.compress_size, info.CRC)
            )
    return spans


def isal_inflate(fd: int, span: tuple[int, int, int], crc: bool) -> bool:
    """Inflate one member with ISA-L, each output dropped before the next is made (holding it
    makes malloc fault the next one in again: 25% slower); True when its CRC holds (or is not
    asked)."""
    from isal import isal_zlib

    at, remaining, expected = span
    inflater = isal_zlib.decompressobj(-15)
    value = 0
    out = b""
    while remaining or inflater.unconsumed_tail:
        if inflater.unconsumed_tail:
            data = inflater.unconsumed_tail
        else:
            data = os.pread(fd, min(remaining, READ_BLOCK), at)
            if not data:
                return False
            at += len(data)
            remaining -= len(data)
        out = b""
        out = inflater.decompress(data, OUT_CAP)
        if crc:
            value = isal_zlib.crc32(out, value)
    return not crc or value == expected


def best_split(times: list[float], parts: int) -> list[list[int]]:
    """The members (indices) of each process so that the slowest finishes first: exact for 2
    processes (every subset tried; a wheel has few ELF members), longest first otherwise."""
    if parts == 2 and len(times) <= 20:
        total = sum(times)
        best, best_mask = total, 0
        for mask in range(1 << (len(times) - 1)):  # the last member always in the second part
            first = sum(t for i, t in enumerate(times) if mask >> i & 1)
            worst = max(first, total - first)
            if worst < best:
                best, best_mask = worst, mask
        chosen = [i for i in range(len(times)) if best_mask >> i & 1]
        return [chosen, [i for i in range(len(times)) if not best_mask >> i & 1]]
    loads: list[tuple[float, list[int]]] = [(0.0, []) for _ in range(parts)]
    for i in sorted(range(len(times)), key=lambda i: -times[i]):
        loads.sort(key=lambda item: item[0])
        loads[0] = (loads[0][0] + times[i], [*loads[0][1], i])
    return [indices for _, indices in loads]


def isal_limit(wheel: Path, members: list[zipfile.ZipInfo], repeats: int) -> dict[str, float]:
    """The limit: the members inflated with ISA-L over one process per core (forked from this
    one, which has ISA-L imported: no interpreter start), best of ``repeats``; with and without
    the CRC. The split is chosen from each member's time measured alone first."""
    spans = data_spans(wheel, members)
    parts = os.cpu_count() or 1
    fd = os.open(wheel, os.O_RDONLY)
    try:
        alone = []
        for span in spans:
            start = time.perf_counter()
            if not isal_inflate(fd, span, True):
                raise SystemExit("bench_audit: a member of the wheel fails its CRC")
            alone.append(time.perf_counter() - start)
        split = best_split(alone, parts)
        results = {"one_process_s": sum(alone), "split_estimate_s": max(
            sum(alone[i] for i in part) for part in split
        )}  # fmt: skip
        for crc in (True, False):
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                pids = []
                for part in split:
                    pid = os.fork()
                    if pid == 0:  # pragma: no cover - the child
                        ok = all(isal_inflate(fd, spans[i], crc) for i in part)
                        os._exit(0 if ok else 1)
                    pids.append(pid)
                codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
                elapsed = time.perf_counter() - start
                if any(codes):
                    raise SystemExit("bench_audit: the limit's inflate failed")
                best = min(best, elapsed)
            results["limit_s" if crc else "limit_no_crc_s"] = best
        return results
    finally:
        os.close(fd)


def _pss_kib(pid: int) -> int:
    """A process's proportional set size (pages shared with others counted by their share)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _tree_memory_kib(root: int) -> tuple[int, int]:
    """Resident memory of a process and all its descendants, from /proc: the sum of their RSS
    (which counts the pages a forked worker shares with its parent once per process) and of
    their PSS (which counts each page once, divided among the processes that map it)."""
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
    return sum(rss.get(pid, 0) for pid in tree), sum(_pss_kib(pid) for pid in tree)


def run_measured(argv: list[str]) -> tuple[float, int, int, int]:
    """Wall time, peak RSS and peak PSS in KiB of the whole process tree (sampled), and the
    exit code.

    The RSS peak is the larger of the sampled tree total and the kernel's own high-water mark
    of the main process (which catches spikes between samples).
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = peak_pss = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        rss, pss = _tree_memory_kib(proc.pid)
        peak, peak_pss = max(peak, rss), max(peak_pss, pss)
        time.sleep(0.05)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, max(peak, usage.ru_maxrss), peak_pss, proc.returncode


def run_timed(argv: list[str]) -> tuple[float, int]:
    """Wall time and exit code, nothing sampled meanwhile: on 2 cores, the memory sampler's
    walk over /proc every 50 ms took CPU from the audit it measured (0.90-0.93 s unsampled,
    0.96-1.01 s sampled, same code, same minutes)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    code = proc.wait()
    return time.perf_counter() - start, code


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
            _, rss, _, _ = run_measured(
                [str(tool), "-all", "-lelf", "-lptx", str(Path(tmp) / m.filename)]
            )
            peak = max(peak, rss)
        return time.perf_counter() - start, peak


PHASES = r"""
import json, os, sys, time
start = time.perf_counter()
from archwheel.interfaces.commands import audit as command
from archwheel.binary.scan.binary import scan_member
from archwheel.binary.scan.inputs import _is_text_member, scan_wheel
from archwheel.binary.zipread import WheelReader
from archwheel.binary.zipmember import member_chunks
from archwheel.interfaces.render.common import dump_json
from archwheel.verdicts.audit import audit, audit_document
import io
from pathlib import Path
out = {"imports_s": time.perf_counter() - start}
wheel = Path(sys.argv[1])
start = time.perf_counter()
reader = WheelReader(wheel)
out["directory_s"] = time.perf_counter() - start
big = sorted((m for m in reader.members if m.compressed_size >= 8 << 20), key=lambda m: -m.size)
members = {}
for m in big:  # one process, one after the other: inflate + CRC alone, then the whole scan
    start = time.perf_counter()
    for _ in member_chunks(wheel, reader.archive_size, m):
        pass
    inflate = time.perf_counter() - start
    start = time.perf_counter()
    scan_member(wheel, reader.archive_size, m, None)
    members[m.name] = {"inflate_s": inflate, "scan_s": time.perf_counter() - start}
out["members"] = members
start = time.perf_counter()
inventory = scan_wheel(wheel)
out["scan_wheel_s"] = time.perf_counter() - start
start = time.perf_counter()
report = audit(inventory, None)
document = audit_document([report])
out["result_s"] = time.perf_counter() - start
start = time.perf_counter()
dump_json(document, io.StringIO())
out["json_s"] = time.perf_counter() - start
print(json.dumps(out))
"""


def phases(wheel: Path) -> dict[str, object]:
    """Where the audit's time goes, measured in a fresh process (see ``PHASES``)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - start
    proc = subprocess.run(
        [sys.executable, "-c", PHASES, str(wheel)], check=True, capture_output=True, text=True
    )
    found: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    found["interpreter_s"] = bare
    return found


def print_phases(found: dict[str, object]) -> None:
    print(f"  interpreter start (python -c pass)  {found['interpreter_s']:.3f} s")
    print(f"  imports of the audit command        {found['imports_s']:.3f} s")
    print(f"  zip directory                       {found['directory_s']:.3f} s")
    members = found["members"]
    assert isinstance(members, dict)
    for name, m in members.items():
        walk = m["scan_s"] - m["inflate_s"]
        print(
            f"  {name:34s}  inflate+CRC {m['inflate_s']:.3f} s, scan {m['scan_s']:.3f} s "
            f"(search and walk {walk:+.3f} s), one process"
        )
    print(f"  scan_wheel (all members, workers)   {found['scan_wheel_s']:.3f} s")
    print(f"  result (verdict, document)          {found['result_s']:.3f} s")
    print(f"  JSON                                {found['json_s']:.3f} s")


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    repeats = 1 if quick else 3
    wheel = fetch_wheel()
    members = elf_members(wheel)
    inflated = sum(m.file_size for m in members)
    print(f"wheel: {wheel.name}, {len(members)} ELF members, {inflated / 2**20:.0f} MiB inflated")
    print(f"cpus: {os.cpu_count()}, load average (1/5/15 min): {load()}")

    if "--phases" in argv:
        print("where the audit's time goes (a fresh process):")
        print_phases(phases(wheel))
        print(f"load average: {load()}")

    limit = isal_limit(wheel, members, repeats)
    print(
        f"the limit, ISA-L over {os.cpu_count()} processes: {limit['limit_s']:.2f} s with the "
        f"CRC, {limit['limit_no_crc_s']:.2f} s without (one process: "
        f"{limit['one_process_s']:.2f} s); load average {load()}"
    )
    base = min(inflate_only(wheel, members) for _ in range(1 if quick else 2))
    print(f"baseline 1, zlib inflate of the ELF members, one process: {base:.2f} s")

    audit_cmd = [sys.executable, "-m", "archwheel.interfaces.cli", "audit", str(wheel),
                 "--format", "json", "-o", os.devnull]  # fmt: skip
    runs = [run_timed(audit_cmd) for _ in range(repeats)]  # timed alone, then measured
    sampled = [run_measured(audit_cmd) for _ in range(1 if quick else 2)]
    for code in [r[1] for r in runs] + [r[3] for r in sampled]:
        if code not in (0, 1):
            print(f"archwheel audit failed with exit code {code}", file=sys.stderr)
            return 1
    audit_time = min(r[0] for r in runs)
    audit_rss = max(r[1] for r in sampled) / 1024
    audit_pss = max(r[2] for r in sampled) / 1024
    print(
        f"archwheel audit: {audit_time:.2f} s (runs: {', '.join(f'{r[0]:.2f}' for r in runs)}), "
        f"peak RSS {audit_rss:.0f} MB, peak PSS {audit_pss:.0f} MB (whole process tree, "
        f"sampled in {len(sampled)} more runs: {', '.join(f'{r[0]:.2f}' for r in sampled)} s); "
        f"load average {load()}"
    )
    ratio = audit_time / limit["limit_s"]
    results: dict[str, float | int | str | None] = {
        "wheel": wheel.name,
        "limit_s": round(limit["limit_s"], 3),
        "limit_no_crc_s": round(limit["limit_no_crc_s"], 3),
        "inflate_s": round(base, 3),
        "audit_s": round(audit_time, 3),
        "audit_peak_rss_mb": round(audit_rss),
        "audit_peak_pss_mb": round(audit_pss),
        "ratio_audit_over_limit": round(ratio, 3),
        "ratio_audit_over_inflate": round(audit_time / base, 3),
        "load_average": round(os.getloadavg()[0], 2),
    }
    failures = []
    if ratio > TARGET_LIMIT:
        failures.append(f"audit/limit = {ratio:.2f} > {TARGET_LIMIT}")
    if audit_pss >= TARGET_RSS_MB:
        failures.append(f"peak PSS {audit_pss:.0f} MB >= {TARGET_RSS_MB} MB")

    tool = find_cuobjdump()
    if quick or "--no-cuobjdump" in argv:
        print("cuobjdump baseline skipped (--quick or --no-cuobjdump)")
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
    print(f"ratio  audit / limit            = {ratio:5.2f}   (target <= {TARGET_LIMIT})")
    print(f"ratio  audit / limit, no CRC    = {audit_time / limit['limit_no_crc_s']:5.2f}")
    print(f"ratio  audit / zlib, 1 process  = {audit_time / base:5.2f}")
    if "speedup_vs_cuobjdump" in results:
        speedup = results["speedup_vs_cuobjdump"]
        print(f"ratio  unzip+cuobjdump / audit = {speedup:5.1f}   (target >= 10)")
    print(f"peak memory of the audit       = {audit_pss:5.0f} MB PSS (target < {TARGET_RSS_MB}), "
          f"{audit_rss:.0f} MB RSS summed over its processes")  # fmt: skip
    out = CACHE / "bench" / "audit.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {out}")
    for f in failures:
        print(f"TARGET MISSED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
