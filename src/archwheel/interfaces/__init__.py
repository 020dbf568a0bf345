"""Interfaces: the command line and the renderings of results (table, JSON, Markdown)."""
