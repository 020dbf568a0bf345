"""Sub-commands of ``archwheel``; each command module defines ``register(subparsers)``.

A command turns argv into a typed request (a frozen dataclass made from the argparse result by
its ``from_args``; nothing below ``interfaces/`` sees ``argparse``), makes one call into the use
case or verdict, and hands the result to its module in ``interfaces/render/``. ``options`` holds
the options several commands share (``--interpreter``, the hidden deprecated aliases).

The command line starts at once (``archwheel --help`` in well under 150 ms): a command module
imports nothing heavy at its top (no ``rich``, no facts file, no scanner, no compression
library); what its command needs is imported inside ``run``. It imports the floors below only by
their public names (``from archwheel.<floor> import NAME``, a name of that package's
``__all__``; ``tests/unit/interfaces/test_command_imports.py`` checks both).
"""

from __future__ import annotations

# Every command, in the order `archwheel --help` lists them: its name, the module that
# registers it, and its line in that list (the module's parser says the same:
# tests/unit/interfaces/test_command_imports.py).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("audit", "audit", "list the SASS/PTX every library really contains; compare with --expect"),
    ("arch", "arch", "normalize an arch list, or recommend the smallest one for your GPUs"),
    ("gpus", "arch", "list the GPU names and compute capabilities archwheel knows"),
    ("can-run", "can_run", "say whether wheels run natively, by JIT, or not at all on given GPUs"),
    (
        "can-load",
        "can_load",
        "say whether a wheel's libraries load next to a given torch (symbols, sonames)",
    ),
    ("diff", "diff", "compare the device code, versions and CUDA pins of two builds (CI gate)"),
    (
        "doctor",
        "doctor",
        "report this host's GPUs, driver and installed torch, with a verdict per GPU",
    ),
    (
        "manifest",
        "manifest",
        "record wheels (checksums, versions, CUDA pins, arch inventory) in a manifest",
    ),
    ("verify", "manifest", "check wheel files or the running environment against a manifest"),
    (
        "build-files",
        "build_files",
        "prove each CUDA compile step of a configured build carries exactly the requested archs",
    ),
    ("build", "build", "build a wheel for exactly your archs in a container, then audit it"),
    (
        "base-image",
        "build",
        "make the Debian base image locally (debootstrap + import; no registry needed)",
    ),
    ("matrix", "matrix", "plan and build a matrix of wheels into a PEP 503 index"),
    ("clean", "clean", "remove the containers and temporary folders that killed runs left"),
    ("publish", "matrix", "audit wheels and publish them into a PEP 503 index"),
    (
        "smoke",
        "smoke",
        "install wheels in a fresh environment and prove their kernels run on this GPU",
    ),
)

# The line of each command in `archwheel --help`, for the command modules' parsers.
SUMMARY: dict[str, str] = {name: line for name, _, line in COMMANDS}
