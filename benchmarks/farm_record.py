"""Record a real build's compile jobs for the farm simulation (``bench_farm_sim.py``).

    python benchmarks/farm_record.py RECIPE ARCH OUT.json [archwheel build options...]
    python benchmarks/farm_record.py --from-work KEPT_WORK_FOLDER RECIPE ARCH OUT.json

runs ``archwheel build --recipe RECIPE --arch ARCH --no-cache --keep-work`` with a copy of the
recipe whose build command first puts a timing shim in front of the host compiler (``gcc``,
``g++``, ``c++``, ``cc`` and the ``x86_64-linux-gnu-`` names setuptools calls) and of nvcc
(``PYTORCH_NVCC``, ``NVCC_LAUNCHER``, ``nvcc`` on ``PATH``). The shim writes each call's start,
end, working folder and arguments to ``/build/.archwheel/farm-jobs/``; a compiler started by
nvcc itself is not timed (its phases are in nvcc's own ``--time`` record, which every build
writes to ``/build/.archwheel/nvcc-time.csv``). The copy turns nvcc ``--threads`` off, so the
build runs one process per core and each phase's time is its own, not shared with a sibling
thread. Nothing else of the build changes: the same sources, flags, jobs and container.
An nvcc call the shim cannot see (setuptools without ninja starts ``$CUDA_HOME/bin/nvcc`` by
its path) is taken from nvcc's record: its phases' time, ending at its object's modification
time. ``--from-work`` makes the fixture again from a kept work folder.

The fixture holds what the simulation needs and nothing of the machine: nvcc's rows, and per
timed call its start and end (ms from the first call), kind, output and inputs.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FARM = "/build/.archwheel/farm"
JOBS = "/build/.archwheel/farm-jobs"
SHIM_NAMES = (
    "gcc",
    "g++",
    "cc",
    "c++",
    "x86_64-linux-gnu-gcc",
    "x86_64-linux-gnu-g++",
    "x86_64-linux-gnu-gcc-12",
    "x86_64-linux-gnu-g++-12",
    "nvcc",
)

SHIM = r"""#!/bin/bash
# Times one compiler call into the farm-jobs folder; a call nvcc makes itself is not timed.
self=${0##*/}
dir=${0%/*}
if [ "$self" = launch ]; then real=$1; shift; else
  real=$(PATH=${PATH//"$dir:"/} command -v "$self") || { echo "$self: not found" >&2; exit 127; }
fi
p=$PPID
for _ in 1 2 3 4; do  # nvcc starts its compilers through sh
  case "$(cat /proc/$p/comm 2>/dev/null)" in
    nvcc|cicc|ptxas|cudafe++|fatbinary|nvlink) exec "$real" "$@";;
  esac
  read -r _ _ _ p _ < /proc/$p/stat 2>/dev/null || break
done
start=$(date +%s%N)
"$real" "$@"
rc=$?
end=$(date +%s%N)
printf '%s\0' "$start" "$end" "$rc" "$PWD" "${real##*/}" "$@" > "JOBS/$start-$$"
exit $rc
""".replace("JOBS", JOBS)


def instrumented_command(command: str) -> str:
    """The recipe's build command with the timing shim set up in front of it."""
    links = " ".join(SHIM_NAMES)
    setup = (
        f"mkdir -p {FARM} {JOBS}\n"
        f"cat > {FARM}/launch <<'ARCHWHEEL_FARM_SHIM'\n{SHIM}ARCHWHEEL_FARM_SHIM\n"
        f"chmod 755 {FARM}/launch\n"
        f"for n in {links}; do ln -sf launch {FARM}/$n; done\n"
        f'export PATH="{FARM}:$PATH"\n'
        f'export PYTORCH_NVCC="{FARM}/launch /usr/local/cuda/bin/nvcc"\n'
        f"export NVCC_LAUNCHER={FARM}/launch\n"
    )
    return setup + command.strip() + "\n"


def instrumented_recipe(recipe: Path, folder: Path) -> Path:
    """A copy of ``recipe`` in ``folder``: the shim before its command, nvcc --threads off, a
    relative source path made absolute."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    text = recipe.read_text()
    data = tomllib.loads(text)
    command = data["build"]["command"]
    start = text.index('command = """')
    end = text.index('"""', start + len('command = """')) + 3
    body = instrumented_command(command).replace("\\", "\\\\").replace('"""', '\\"""')
    text = text[:start] + f'command = """\n{body}"""' + text[end:]
    path = data["source"].get("path")
    if path is not None:
        absolute = (recipe.parent / path).resolve()
        text = re.sub(r'(?m)^path = ".*"$', f'path = "{absolute}"', text, count=1)
    if "[build.parallel]" in text:
        raise SystemExit(f"{recipe}: has its own [build.parallel]; record it by hand")
    text = text.replace("[build.env]", "[build.parallel]\nnvcc_threads = false\n\n[build.env]", 1)
    out = folder / recipe.name
    out.write_text(text)
    return out


def _args(folder: Path) -> list[tuple[int, int, int, str, str, list[str]]]:
    calls = []
    for entry in sorted(folder.iterdir()):
        fields = entry.read_bytes().decode("utf-8", "replace").split("\0")[:-1]
        if len(fields) < 5:
            continue
        start, end, rc, cwd, tool, *argv = fields
        calls.append((int(start), int(end), int(rc), cwd, tool, argv))
    return calls


def _absolute(cwd: str, name: str) -> str:
    return os.path.normpath(name if name.startswith("/") else f"{cwd}/{name}")


_SOURCE = re.compile(r"\.(c|cc|cpp|cxx|cu)$")


def timed_jobs(folder: Path, rows: list[list[str]], work: Path) -> list[dict[str, object]]:
    """The shim's records as jobs: kind (nvcc, compile, link, other), start and end in ms
    from the first call, the output and the inputs (absolute paths). An nvcc call the shim did
    not see (setuptools without ninja runs ``$CUDA_HOME/bin/nvcc`` by its path and reads no
    ``PYTORCH_NVCC``) is taken from nvcc's own record: its phases' time, ending when its object
    was written (the object's modification time in the kept work folder)."""
    calls = _args(folder)
    cwds = sorted({c[3] for c in calls}) or ["/build/src"]
    seen = {
        _absolute(c[3], c[5][c[5].index("-o") + 1])
        for c in calls
        if c[4] == "nvcc" and "-o" in c[5][:-1]
    }
    calls += [c for c in _nvcc_from_record(rows, cwds, work) if c[5][-1] not in seen]
    if not calls:
        return []
    first = min(c[0] for c in calls)
    jobs = []
    for start, end, rc, cwd, tool, argv in calls:
        output = ""
        if "-o" in argv[:-1]:
            output = _absolute(cwd, argv[argv.index("-o") + 1])
        sources = [_absolute(cwd, a) for a in argv if _SOURCE.search(a) and not a.startswith("-")]
        objects = [_absolute(cwd, a) for a in argv if a.endswith(".o") and not a.startswith("-")]
        if tool in ("nvcc", "nvcc-record"):
            kind = "nvcc"
        elif "-c" in argv and sources:
            kind = "compile"
        elif "-shared" in argv or (objects and "-c" not in argv):
            kind = "link"
        else:
            kind = "other"
        inputs = sources if kind in ("nvcc", "compile") else [o for o in objects if o != output]
        jobs.append(
            {
                "kind": kind,
                "tool": tool,
                "start_ms": round((start - first) / 1e6, 1),
                "end_ms": round((end - first) / 1e6, 1),
                "rc": rc,
                "output": output,
                "inputs": inputs,
                "source_as_given": next(
                    (a for a in argv if _SOURCE.search(a) and not a.startswith("-")), ""
                ),
            }
        )
    return sorted(jobs, key=lambda j: (j["start_ms"], j["output"]))


def _nvcc_from_record(
    rows: list[list[str]], cwds: list[str], work: Path
) -> list[tuple[int, int, int, str, str, list[str]]]:
    """nvcc calls as the shim would have recorded them, from nvcc's rows: per source, one call
    per host compile row (the last phase of a call), its time the sum of its rows and the
    driver's; tool ``nvcc-record``, arguments ``-c SOURCE -o OBJECT``."""
    driver = {r[3]: float(r[6]) for r in rows if not r[0] and r[1] == "nvcc (driver)"}
    groups: dict[str, list[list[list[str]]]] = {}
    for row in rows:
        if not row[0]:
            continue
        calls = groups.setdefault(row[0], [[]])
        calls[-1].append(row)
        if row[1] == "gcc (compiling)":
            calls.append([])
    found = []
    for source, calls in groups.items():
        for call in calls:
            if not call or call[-1][1] != "gcc (compiling)":
                continue
            given = call[-1][3]
            ms = sum(float(r[6]) for r in call) + driver.get(given, 0.0)
            for cwd in cwds:
                path = _absolute(cwd, given)
                host = work / path.removeprefix("/build/")
                if host.is_file():
                    end = host.stat().st_mtime_ns
                    found.append(
                        (
                            end - int(ms * 1e6),
                            end,
                            0,
                            cwd,
                            "nvcc-record",
                            ["-c", source, "-o", path],
                        )
                    )
                    break
            else:
                print(f"nvcc's record names {given}, which is not in the work folder: left out")
    return found


def nvcc_rows(path: Path) -> list[list[str]]:
    """nvcc's --time rows, each field stripped, the header left out."""
    rows = []
    with path.open(newline="") as handle:
        for raw in csv.reader(handle):
            row = [f.strip() for f in raw]
            if len(row) >= 8 and row[0] != "source file name":
                rows.append(row[:8])
    return rows


def record(recipe: Path, arch: str, out: Path, extra: list[str]) -> int:
    """Run the instrumented build and write the fixture; the build's exit status."""
    with tempfile.TemporaryDirectory(prefix="farm-record-") as tmp:
        copy = instrumented_recipe(recipe, Path(tmp))
        command = [
            sys.executable, "-m", "archwheel.interfaces.cli",
            "build", "--recipe", str(copy), "--arch", arch,
            "--no-cache", "--keep-work", "--format", "json", "--out", str(Path(tmp) / "dist"),
            *extra,
        ]  # fmt: skip
        print("running:", " ".join(command), flush=True)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stdout[-4000:], done.stderr[-4000:])
            return done.returncode
        report = json.loads(done.stdout)
    work = Path(_find_work(done.stdout + done.stderr))
    return write_fixture(recipe, arch, out, work, report.get("timings_s") or _timings(report))


def write_fixture(recipe: Path, arch: str, out: Path, work: Path, timings: object) -> int:
    """The fixture of a build from its kept work folder and its timings."""
    rows = nvcc_rows(work / ".archwheel" / "nvcc-time.csv")
    jobs = timed_jobs(work / ".archwheel" / "farm-jobs", rows, work)
    fixture = {
        "recipe": recipe.name,
        "arch": arch,
        "cores": os.cpu_count(),
        "recorded_with": f"python benchmarks/farm_record.py recipes/{recipe.name} '{arch}' {out}",
        "timings_s": timings,
        "nvcc_rows": rows,
        "jobs": jobs,
    }
    out.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {out}: {len(jobs)} timed calls, {len(rows)} nvcc rows")
    print(f"the work folder {work} is kept; remove it when done")
    return 0


def _timings(report: dict[str, object]) -> object:
    for value in report.values():
        if isinstance(value, dict) and "timings_s" in value:
            return value["timings_s"]
    return {}


def _find_work(text: str) -> str:
    found = re.search(r"keeping the work folder (\S+?) \(--keep-work\)", text)
    if found:
        return found.group(1)
    raise SystemExit("the build's report names no kept work folder")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--from-work"] and len(sys.argv) == 6:
        # again from a kept work folder: the timings are taken from the fixture already there
        _, _, work_folder, recipe_path, arch_list, out_path = sys.argv
        kept = json.loads(Path(out_path).read_text()).get("timings_s", {})
        sys.exit(
            write_fixture(Path(recipe_path), arch_list, Path(out_path), Path(work_folder), kept)
        )
    if len(sys.argv) < 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    sys.exit(record(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4:]))
