#!/usr/bin/env bash
# archwheel GPU truth table (issue 5 item 4). Run on the GPU machine, from the repository root:
#
#     bash gpu/truth_table.sh            # results under $OUT (the device tool sets it), else out/
#
# Needs: python3, an NVIDIA driver (libcuda.so.1), and either the kernels prebuilt into
# gpu/build/ (carried: `python3 gpu/truth_table.py build --out gpu/build` on the dev machine) or
# nvcc on PATH to build them here. No network. torch is optional: without it the torch part
# says so and the tiny-kernel table still stands.
#
# Writes (at most 8 files, as the device tool brings back):
#   truth_table.md / .json / .log   the tiny kernels: case x route x mode, against the rules
#   nvidia-smi.txt                  the device and driver
#   smoke_torch.txt / .json / .log  `archwheel smoke --backend existing` on this machine's torch
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out/truth-table}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

# Wheels archwheel needs beyond the image's packages (zstandard, lz4 for the scanner), carried in
# .whl/ (see docs/smoke.md); harmless when absent.
if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/archwheel-site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/archwheel-site"
fi

{
    date -u '+%Y-%m-%d %H:%M:%S UTC'
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
    nvidia-smi
} >"$OUT/nvidia-smi.txt" 2>&1

BUILD=gpu/build
if [ ! -f "$BUILD/manifest.json" ]; then
    echo "gpu/build/ was not carried: building the kernels here with ${NVCC:-nvcc}"
    "$PY" gpu/truth_table.py build --out "$BUILD" --nvcc "${NVCC:-nvcc}" || exit 4
fi

"$PY" gpu/truth_table.py table --build "$BUILD" --out "$OUT" --timeout 30 --jobs 8 2>&1 | tee "$OUT/truth_table.log"
table_rc=${PIPESTATUS[0]}

# The torch part: the real payload through archwheel smoke, on the torch this machine has.
# (The torch 2.14.1+cu130 wheel cannot travel: it is cp311 and its nvidia-* requirements are
# several GB, over the 64 MiB a device call carries; docs/smoke.md.)
if "$PY" -c "import torch" 2>/dev/null; then
    timeout -k 10 200 "$PY" -m archwheel.interfaces.cli smoke --backend existing \
        --interpreter "$(command -v "$PY")" --timeout 60 --output "$OUT/smoke_torch.json" \
        >"$OUT/smoke_torch.txt" 2>"$OUT/smoke_torch.log"
    smoke_rc=$?
    cat "$OUT/smoke_torch.txt"
else
    echo "torch is not importable with $PY: the torch part was not run" | tee "$OUT/smoke_torch.txt"
    smoke_rc=-1
fi

echo "truth table exit $table_rc (0 all rows agree, 1 some disagree, 20 no CUDA device); smoke exit $smoke_rc"
[ "$table_rc" -eq 0 ] && [ "$smoke_rc" -le 0 ]
