"""The wheel: the repair step (``repair``, ``repair_image``, ``repair_tag``, ``restamp``) and its
preview on a partial build's libraries (``preview``), the
gates (``gate``, ``module_gate``), the deterministic re-pack and the comparison of two builds
(``reproducible``), the torch label of a wheel (``wheel_label``), and the comparison with the
official build (``official``).

May import the rooms ``planning``, ``sources``, ``images``, ``recipes`` and ``compile`` and the
floors below.
"""
