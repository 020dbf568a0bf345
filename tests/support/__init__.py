"""Helpers shared by the test modules: builders of inputs, the external components tests need,
fixture data. Test modules import from here (and take fixtures from the conftest files); they
never import each other (``tests/unit/test_test_layout.py`` checks it)."""
