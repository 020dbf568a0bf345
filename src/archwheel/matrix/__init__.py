"""The matrix use case: plan a build matrix, build the missing cells, and publish audited wheels.

``index`` publishes wheels into a PEP 503 simple index (plus find-links pages per torch+CUDA)
atomically, auditing each wheel itself; ``plan`` turns a matrix (recipes x torch x Python x arch
lists, less exclusions) into cells and says which are already in the index; ``run`` builds the
missing cells through a builder passed in (this floor never imports ``wheelbuild/``) and publishes
each one that passed. docs/matrix.md has the design.
"""
