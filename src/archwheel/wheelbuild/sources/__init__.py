"""Sources: a recipe's source resolved to a local folder (``source``, ``index_sdist``; a Debian
source package fetched, verified and unpacked by ``debian_source``, the Build-Depends of its
control file read by ``debian_depends``), its
patches applied (``source_patches``), and its build files read before any compile: the CMake files
(``cmake_project``), the arch switches (``source_check``) and what the project declares about
its Python and torch (``project_constraints``).

May import the rooms ``images``, ``recipes`` and ``compile`` and the floors below.
"""
