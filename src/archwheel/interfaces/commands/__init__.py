"""Sub-commands of ``archwheel``; each module defines ``register(subparsers)``."""
