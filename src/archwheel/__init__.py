"""archwheel: build CUDA wheels for exactly your GPU architectures, prove what they contain,
and prove they run.

The package is layered; each layer imports only the ones above it in this list:

- ``archwheel.facts``: CUDA facts as data (toolkits, drivers, GPUs) and the arch model.
- ``archwheel.binary``: read-only inspection of ELF files, fatbins, archives and wheels.
- ``archwheel.verdicts``: audits and compatibility verdicts over inspection results.
- ``archwheel.orchestration``: recipes, containers, builds, smoke tests, host probes.
- ``archwheel.interfaces``: the command line and the renderers (table, JSON, Markdown).
"""

__version__ = "0.1.0"
