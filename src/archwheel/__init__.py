"""archwheel: build CUDA wheels for exactly your GPU architectures, prove what they contain,
and prove they run.

The package is layered in floors; a module imports only from its own floor and the ones below
(``tests/unit/test_layers.py`` checks it), and the use cases sharing floor 4 never import each
other:

7. ``archwheel.interfaces``: the command line (argv -> typed request -> one call), ``render/``
   (every human text, JSON and Markdown of every command) and ``api`` (the Python API below).
6. ``archwheel.matrix``: build matrices into a PEP 503 index (each cell built by the build).
5. ``archwheel.wheelbuild``: recipes, containers, the gates (inspection's audit and can-load),
   provenance.
4. the use cases side by side: ``archwheel.inspection`` (audit, arch, can-run, can-load, diff,
   manifest and verify: read inputs and environments, judge them), ``archwheel.smoke`` (real
   kernels in an isolated environment), ``archwheel.doctor`` (this host's GPUs and torch),
   ``archwheel.crosscheck`` (NVIDIA's cuobjdump as an oracle), ``archwheel.housekeeping``
   (what runs that did not end cleanly left behind).
3. ``archwheel.verdicts``: pure judgements over the values handed to them (audit, can-run,
   can-load, recommend, manifest, smoke verdicts, comparison with cuobjdump).
2. ``archwheel.binary``: read-only inspection of ELF files, fatbins, archives and wheels.
1. ``archwheel.effects``: every side effect: processes, files, the cache folder, the container
   engine, the watchdog, host probes.
0. ``archwheel.facts``: CUDA facts as data (toolkits, drivers, GPUs), the arch grammars, the rules.

``errors.py``, ``exit_codes.py``, ``text.py``, ``_version.py`` and ``_lazy.py`` sit beside the
floors and import none of them.

The Python API (docs/api.md): ``audit``, ``can_run``, ``can_load`` and ``diff`` (from
``interfaces/api.py``, imported on first use: ``import archwheel`` imports nothing else), with
the exceptions of ``archwheel.errors``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports
from archwheel._version import __version__
from archwheel.errors import ArchwheelError, InputError, ToolError, UsageError

# The API functions, from interfaces/api.py only (tests/unit/test_layers.py).
if TYPE_CHECKING:
    from archwheel.interfaces.api import audit, can_load, can_run, diff

__all__, __getattr__, __dir__ = lazy_exports(__name__)
