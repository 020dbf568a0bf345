"""Find every fatbin entry in wheels, files, directories and installed distributions.

- ``binary``: scanning one binary (ELF, ar archive, cubin, raw fatbin, a wheel member) into
  libraries, their fatbin containers and entries, and the problems met;
- ``inputs``: what to scan for a path, a wheel, a directory or an installed distribution;
- ``pool``: a wheel's big members scanned in worker processes (forked, or ``worker`` spawned).

Import from those modules; this package re-exports nothing.
"""
