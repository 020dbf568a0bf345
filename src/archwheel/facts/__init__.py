"""CUDA facts: the versioned data file, the arch model and the compatibility rules."""
