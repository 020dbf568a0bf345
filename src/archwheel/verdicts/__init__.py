"""Verdicts: audits against a requested arch list, compatibility with GPUs and drivers."""
