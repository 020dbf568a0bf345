"""Running a plan: the work folder and its containers (``workfolder``), the build's output and
timings (``output``, ``stages``), the CUDA compiles' progress while they run
(``compile_watch``), why a compile failed (``failures``), the compile farm of one
build (``farm_build``), the cache report (``cache_report``), the provenance file
(``provenance``) and a build tree kept under a name to resume (``kept_tree``).

May import every other room (``wheel``, ``planning``, ``sources``, ``images``, ``recipes``,
``compile``) and the floors below; ``runner.py`` and ``usecase.py`` above it import it.
"""
