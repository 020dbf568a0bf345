"""``archwheel can-load``: will this wheel's libraries load next to that torch?"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from archwheel.binary.demangle import demangle
from archwheel.binary.dynamic import DynamicInfo, read_file_dynamic, read_installed_dynamic
from archwheel.errors import UsageError
from archwheel.exit_codes import EXIT_INCOMPLETE, EXIT_OK, EXIT_VERDICT_FAILED
from archwheel.interfaces.commands.options import add_interpreter_option
from archwheel.interfaces.render.can_load import render_markdown, render_table
from archwheel.interfaces.render.common import FORMATS, console, dump_json
from archwheel.verdicts.load import (
    LoadReport,
    LoadVerdict,
    WheelFiles,
    is_torch,
    judge_load,
    mangled_names,
    policy_for,
    read_wheel_files,
)

DESCRIPTION = """\
For every shared library of WHEEL, resolve each DT_NEEDED as the dynamic loader would after
`import torch` (the wheels' own libraries, $ORIGIN-relative RPATH/RUNPATH, the --with wheels laid
out as pip installs them, the libraries torch has loaded, the system libraries the manylinux
policy allows) and match every undefined dynamic symbol (with its version) against what it
resolves to. Nothing is installed or extracted; no GPU is needed.

exit codes: 0 every library loads; 1 some library does not load; 3 an input could not be read
completely or something could not be checked; 2 usage error (no torch among --with, two
torches)."""

EXAMPLES = """\
examples:
  archwheel can-load dist/myext-1.0-cp311-cp311-linux_x86_64.whl --with torch-2.14.1-*.whl
  archwheel can-load torchvision-0.29.1-*.whl --with torch-2.13.0+cpu-*.whl --format markdown
"""

# Where the host's own copies of system libraries are looked for (ld.so's default folders).
HOST_LIBRARY_DIRS = (
    "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64",
)  # fmt: skip


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "can-load",
        help="say whether a wheel's libraries load next to a given torch (symbols, sonames)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("wheel", type=Path, metavar="WHEEL", help="the wheel to judge")
    p.add_argument(
        "--with",
        dest="with_wheels",
        action="append",
        default=[],
        type=Path,
        metavar="WHEEL",
        help="a wheel installed next to it: exactly one torch, and any others (nvidia-*); "
        "repeatable",
    )
    p.add_argument(
        "--installed",
        action="store_true",
        help="judge against the torch (and nvidia-* packages) installed in this environment "
        "(or --interpreter's) instead of --with wheels",
    )
    add_interpreter_option(p, "the interpreter whose environment --installed reads")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument(
        "--no-host-libraries",
        action="store_true",
        help="do not read this machine's libc/libstdc++ as stand-ins for the system libraries",
    )
    p.set_defaults(func=run)


def installed_wheels(python: str | None) -> list[WheelFiles]:
    """torch and the nvidia-*/cuda-* packages of an environment, as the model's wheels."""
    from packaging.requirements import InvalidRequirement, Requirement

    out: list[WheelFiles] = []
    for dist in read_installed_dynamic(python):
        requires: list[tuple[str, str, str]] = []
        for line in dist.requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            requires.append((req.name.lower(), str(req.specifier), str(req.marker or "")))
        local = re.search(r"\+cu([0-9]{2,3})", dist.version)
        out.append(
            WheelFiles(
                filename=f"{dist.name} {dist.version} (installed)",
                name=dist.name,
                version=dist.version,
                tags=(),
                libraries=dist.libraries,
                requires=tuple(requires),
                cuda_major=int(local.group(1)[:-1]) if local else None,
            )
        )
    return out


def host_libraries(names: frozenset[str]) -> dict[str, DynamicInfo]:
    found: dict[str, DynamicInfo] = {}
    for name in sorted(names):
        for folder in HOST_LIBRARY_DIRS:
            candidate = Path(folder) / name
            if candidate.is_file():
                info = read_file_dynamic(candidate)
                if info.is_dynamic and info.complete:
                    found[name] = info
                break
    return found


def exit_code(report: LoadReport) -> int:
    return {
        LoadVerdict.LOADS: EXIT_OK,
        LoadVerdict.FAILS: EXIT_VERDICT_FAILED,
        LoadVerdict.UNKNOWN: EXIT_INCOMPLETE,
    }[report.verdict]


def run(args: argparse.Namespace) -> int:
    if not args.with_wheels and not args.installed:
        raise UsageError(
            "can-load needs the torch to load against", hint="give --with TORCH.whl or --installed"
        )
    if args.with_wheels and args.installed:
        raise UsageError("give --with wheels or --installed, not both")
    for path in [args.wheel, *args.with_wheels]:
        if path.suffix != ".whl":
            raise UsageError(f"{path}: not a wheel (.whl)")
    wheel = read_wheel_files(args.wheel)
    if args.installed:
        others = installed_wheels(args.interpreter)
        if not any(is_torch(w) for w in others):
            raise UsageError(
                f"no torch installed for {args.interpreter or sys.executable}",
                hint="install torch there, or give --with TORCH.whl",
            )
    else:
        others = [read_wheel_files(p) for p in args.with_wheels]
    torches = [w for w in others if is_torch(w)]
    if not torches:
        raise UsageError(
            "none of the --with wheels is torch: "
            + ", ".join(f"{w.filename} is {w.name}" for w in others),
            hint="give the torch wheel with --with",
        )
    if len(torches) > 1:
        raise UsageError(
            "two torches given: " + " and ".join(w.filename for w in torches),
            hint="one environment holds one torch: run can-load once per torch",
        )
    torch = torches[0]
    system: dict[str, DynamicInfo] = {}
    if not args.no_host_libraries:
        policy = policy_for(wheel.tags)
        if policy is not None:
            system = host_libraries(
                policy.libraries | {"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
            )
    report = judge_load(wheel, torch, [w for w in others if w is not torch], system)
    demangled = demangle(mangled_names(report))
    if args.format == "json":
        document = report.to_json()
        for lib in document["libraries"]:
            for s in lib["missing_symbols"]:
                s["demangled"] = demangled.get(s["name"], s["name"])
        document["exit_code"] = exit_code(report)
        dump_json(document)
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(report, demangled))
    else:
        render_table(report, console(), demangled)
    return exit_code(report)
