"""Orchestration: recipes, container engines, builds, smoke tests and host probes."""
