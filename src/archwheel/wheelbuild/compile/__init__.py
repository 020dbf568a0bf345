"""Compiling: how many jobs and how they spread over the cores (``jobs``, ``parallel``, and the
setuptools hook that builds a project's extension modules at once, ``spread_hook``), nvcc's own
record of what it compiled (``nvcc_record``) and how far it is while it runs (``nvcc_progress``),
fatbin compression (``compression``), and the
compiler cache and the
compile farm (``remote_cache``, ``sccache_launcher``, ``sccache_stats``, ``whole_call``,
``dist_farm``, ``farm_record``).

The lowest room of the build: it imports no other room of ``wheelbuild``, only the floors below.
"""
