"""``archwheel manifest`` records tested wheels; ``archwheel verify`` proves a deployment."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import (
    add_interpreter_option,
    check_output,
    path_argument,
    write_output,
)
from archwheel.interfaces.render.formats import FORMATS

# The help states verdicts.manifest.MAX_MANIFEST_BYTES (16777216) and
# render.manifest.MAX_MISMATCH_ROWS (500) as numbers, so that `--help` imports neither
# (tests/unit/interfaces/test_command_imports.py checks that they are the code's).
MANIFEST_EXAMPLES = """\
examples:
  archwheel manifest dist/*.whl -o manifest.json
  archwheel manifest torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl      (JSON on stdout)

Native library hashes are taken from the libraries' bytes (what an installer writes to disk);
where the wheel's RECORD says otherwise, a warning on stderr says so, as it does for RECORD rows
naming files the wheel does not hold and libraries RECORD does not list.

exit codes: 0 written; 3 an unreadable wheel, or a manifest above the 16777216
bytes verify reads (not written: record the wheels in several manifests)
"""

VERIFY_EXAMPLES = """\
examples:
  archwheel verify manifest.json                  the wheels next to the manifest
  archwheel verify manifest.json dist/*.whl       these files
  archwheel verify manifest.json --env            the running environment (no wheel files needed)
  archwheel verify manifest.json --env --interpreter /opt/venv/bin/python

Files are checked when wheels or --dir are given, or when --env is not. --env compares the
installed versions, torch.version.cuda, the nvidia-*/cuda-* pins and the bytes of every native
library with the tested wheels' hashes of them (--no-library-hashes skips the last).

exit codes: 0 everything matches; 1 mismatches (text and Markdown list 500,
--format json all); 3 unreadable manifest or wheel
(a manifest is a regular file of at most 16 MiB, nested at most 32 deep)
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``manifest`` and ``verify`` to the command line, with their flags, help and examples
    (``cli.build_parser`` calls each command module's ``register`` with its subparsers)."""
    make = subparsers.add_parser(
        "manifest",
        help=SUMMARY["manifest"],
        description=(
            "Per wheel: file name, sha256, size, name, version, tags, the CUDA version it "
            "targets, its nvidia-*/cuda-* requirement pins, cuDNN/NCCL versions, the sha256 "
            "of each native library's bytes and the arch inventory from the audit."
        ),
        epilog=MANIFEST_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    make.add_argument("wheels", nargs="+", type=path_argument, metavar="WHEEL")
    make.add_argument("-o", "--output", type=path_argument, help="write here (default: stdout)")
    make.set_defaults(func=run_manifest)

    verify = subparsers.add_parser(
        "verify",
        help=SUMMARY["verify"],
        description="List every difference between a manifest and the files or environment.",
        epilog=VERIFY_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument("manifest", type=path_argument)
    verify.add_argument("wheels", nargs="*", type=path_argument, metavar="WHEEL")
    verify.add_argument("--dir", type=path_argument, help="where the wheel files are")
    verify.add_argument("--env", action="store_true", help="check the installed environment")
    add_interpreter_option(verify, "the environment's interpreter")
    verify.add_argument(
        "--no-library-hashes",
        action="store_true",
        help="with --env: do not hash the installed native libraries",
    )
    verify.add_argument("--format", choices=FORMATS, default="table")
    verify.set_defaults(func=run_verify)


@dataclass(frozen=True)
class ManifestRequest:
    """``archwheel manifest``, parsed."""

    wheels: tuple[Path, ...]
    output: Path | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ManifestRequest:
        """The request of parsed ``args`` (argparse has already checked each flag's type)."""
        return cls(wheels=tuple(args.wheels), output=args.output)


@dataclass(frozen=True)
class VerifyRequest:
    """``archwheel verify``, parsed."""

    manifest: Path
    wheels: tuple[Path, ...]
    dir: Path | None
    env: bool
    interpreter: str | None
    library_hashes: bool
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> VerifyRequest:
        """The request of parsed ``args`` (argparse has already checked each flag's type)."""
        return cls(
            manifest=args.manifest,
            wheels=tuple(args.wheels),
            dir=args.dir,
            env=args.env,
            interpreter=args.interpreter,
            library_hashes=not args.no_library_hashes,
            format=args.format,
        )


def run_manifest(args: argparse.Namespace) -> int:
    """``archwheel manifest``: record the tested wheels (hashes, libraries) as a manifest on
    standard output or in ``-o FILE``."""
    import sys

    from archwheel.inspection import make_manifest
    from archwheel.interfaces.render.manifest import manifest_warning, wrote_manifest

    request = ManifestRequest.from_args(args)
    if request.output is not None:
        check_output(request.output)  # before hashing and scanning every wheel
    manifest = make_manifest(
        request.wheels,
        on_warning=lambda name, text: print(manifest_warning(name, text), file=sys.stderr),
    )
    if request.output is None:
        sys.stdout.write(manifest.text)
        return 0
    write_output(request.output, manifest.text)
    print(wrote_manifest(request.output, manifest.wheels))
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """``archwheel verify``: check wheels, a folder or an environment against a manifest; exit 1 on
    a mismatch."""
    from archwheel.inspection import verify_manifest
    from archwheel.interfaces.render.common import emit_result
    from archwheel.interfaces.render.manifest import verify_markdown, verify_table

    request = VerifyRequest.from_args(args)
    report = verify_manifest(
        request.manifest,
        request.wheels,
        folder=request.dir,
        env=request.env,
        interpreter=request.interpreter,
        library_hashes=request.library_hashes,
    )
    emit_result(request.format, report, verify_table, verify_markdown)
    return report.exit_code
