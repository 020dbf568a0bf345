"""archwheel: build CUDA wheels for exactly your GPU architectures, prove what they contain,
and prove they run.

The package is layered in floors; a module imports only from its own floor and the ones below
(``tests/unit/test_layers.py`` checks it), and the use cases on floor 4 never import each other:

5. ``archwheel.interfaces``: the command line (argv -> typed request -> one call) and ``render/``
   (every human text, JSON and Markdown of every command).
4. the use cases, side by side: ``archwheel.wheelbuild`` (recipes, containers, the audit gate,
   provenance), ``archwheel.smoke`` (real kernels in an isolated environment), ``archwheel.doctor``
   (this host's GPUs and torch), ``archwheel.crosscheck`` (NVIDIA's cuobjdump as an oracle).
3. ``archwheel.verdicts``: pure judgements over inspection results (audit, can-run, recommend,
   manifest, smoke verdicts, comparison with cuobjdump).
2. ``archwheel.binary``: read-only inspection of ELF files, fatbins, archives and wheels.
1. ``archwheel.effects``: every side effect: processes, files, the cache folder, the container
   engine, the watchdog, host probes.
0. ``archwheel.facts``: CUDA facts as data (toolkits, drivers, GPUs), the arch grammars, the rules.

``errors.py`` and ``exit_codes.py`` sit beside the floors and import none of them.
"""

__version__ = "0.1.0"
