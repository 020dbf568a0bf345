"""Can this binary run on that GPU? Verdicts per module, per library, per wheel and per fleet.

- ``gpus``: the GPUs to judge against (``--gpu`` names, ``--cc`` values);
- ``judge``: the judgement: modules (fatbin containers), libraries, inputs, the driver check;
- ``explain``: why, in words, and what to change (fixes, PyTorch install advice);
- ``report``: the verdict vocabulary, the frozen results, the fleet report and its exit code.

Everything here is pure: inventories, GPUs, a driver version and facts in; frozen results out.
Import from those modules; this package re-exports nothing.
"""
