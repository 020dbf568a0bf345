"""archwheel's version, written once: the package (``archwheel.__version__``), the documents
it writes and the build backend (pyproject.toml's ``[tool.setuptools.dynamic]``) read it here.
This module imports nothing."""

__version__ = "0.1.0"
