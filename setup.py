"""The one compiled part of archwheel: an optional accelerator of the binary scan.

Everything else is in pyproject.toml. ``optional=True``: where no C compiler is at hand the
install goes on without it, and the scan runs in Python alone (docs/maintainers/performance.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "archwheel.binary._speedups",
            sources=["src/archwheel/binary/_speedups.c"],
            optional=True,
            # zlib: small wheel members are inflated in C, by the library CPython's zipfile uses.
            libraries=["z"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
