"""Planning: every decision of a build computed without running anything (``plan``), and the
recipes read for a listing or a plan of many builds (``recipe_summary``).

May import the rooms ``sources``, ``images``, ``recipes`` and ``compile`` and the floors below.
"""
