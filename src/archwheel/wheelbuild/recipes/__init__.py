"""Recipes: the recipe files read, validated and turned into frozen objects (``recipe``,
``recipe_doc``, ``recipe_model``, ``recipe_env``, ``recipe_lookup``), a recipe's ``[torch]`` table
and the pinned torch it builds against (``recipe_torch``, ``torch_pin``), the keys of a recipe
built from a Debian source package (``recipe_debian``), and how an arch list in
CMake's syntax reaches CMake (``cmake_arch``).

May import the room ``compile`` and the floors below, nothing else of ``wheelbuild``.
"""
