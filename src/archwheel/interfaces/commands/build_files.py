"""``archwheel build-files PATH --arch LIST``: prove each CUDA compile step of a configured
build carries exactly the requested archs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import path_argument

DESCRIPTION = """\
Read a configured build (a build folder with build.ninja, else compile_commands.json; a PyTorch
source tree's build/; or one of those files) and prove that every CUDA compile step (each nvcc
command, ninja's variables and escapes expanded) carries exactly the requested archs: its
-gencode / -arch / -code images against the list. Images PyTorch's own CMake adds to single
files (sm_90a for RowwiseScaledMM.cu when 9.0 is listed and nvcc >= 12) are named as additions
with their rule (the PyTorch release from version.txt beside the build folder, or --torch; nvcc's
version from CMake's files, or --nvcc).

exit codes: 0 proved; 1 a step deviates, or there is no CUDA step; 3 the build file could not be
read; 2 usage error."""

EXAMPLES = """\
examples:
  archwheel build-files /work/pt/src/pytorch/build --arch "8.0;9.0"
  archwheel build-files build/compile_commands.json --arch "8.0;9.0" --format json
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``build-files`` to the command line."""
    p = sub.add_parser(
        "build-files",
        help=SUMMARY["build-files"],
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "path", type=path_argument, metavar="PATH", help="build folder, build.ninja or "
        "compile_commands.json"
    )  # fmt: skip
    p.add_argument("--arch", required=True, help='the requested arch list, e.g. "8.0;9.0"')
    p.add_argument("--torch", default=None, help="the PyTorch release (default: version.txt)")
    p.add_argument("--nvcc", default=None, help="nvcc's version (default: CMake's record)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    p.set_defaults(func=run)


@dataclass(frozen=True)
class BuildFilesRequest:
    """``archwheel build-files``, parsed."""

    path: Path
    arch: str
    torch: str | None
    nvcc: str | None
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BuildFilesRequest:
        """The request of parsed ``args``."""
        return cls(args.path, args.arch, args.torch, args.nvcc, args.format)


def run(args: argparse.Namespace) -> int:
    """``archwheel build-files``: read, prove, print; 0 when proved, 1 otherwise."""
    from archwheel.facts import ArchList
    from archwheel.inspection import prove_build_files
    from archwheel.interfaces.render.build_files import render_table
    from archwheel.interfaces.render.common import console, dump_json

    request = BuildFilesRequest.from_args(args)
    proof = prove_build_files(
        request.path, ArchList.parse(request.arch), torch=request.torch, nvcc=request.nvcc
    )
    if request.format == "json":
        dump_json(proof.to_json_dict())
    else:
        render_table(proof, console())
    return 0 if proof.ok else 1
