"""Sub-commands of ``archwheel``; each command module defines ``register(subparsers)``.

A command turns argv into a typed request (a frozen dataclass made from the argparse result by
its ``from_args``; nothing below ``interfaces/`` sees ``argparse``), makes one call into the use
case or verdict, and hands the result to its module in ``interfaces/render/``. ``options`` holds
the options several commands share (``--interpreter``, the hidden deprecated aliases).
"""
