"""Planning: every decision of a build computed without running anything (``plan``; its serial and
local-cache variants in ``plan_variants``, its shell fragments in ``plan_parts``), and the
recipes read for a listing or a plan of many builds (``recipe_summary``).

May import the rooms ``sources``, ``images``, ``recipes`` and ``compile`` and the floors below.
"""
