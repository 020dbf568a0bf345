#!/usr/bin/env bash
# Compile CUDA objects of the configured tree with their own build.ninja commands (ninja
# runs the codegen they wait for first), timed, in the build-deps image with the network off:
#   benchmarks/pytorch/compile-objects.sh caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/cuda/Sleep.cu.o
# then `archwheel audit OBJECT --expect "8.0;9.0"`.
set -euo pipefail
WORK=${WORK:-/work/pt}
for obj in "$@"; do
  docker run --rm --network none -v "$WORK/src:/src" archwheel/pytorch-builddeps:2.6.0_dfsg-7 bash -euc "
    cd /src/pytorch/build && time ninja -j2 $obj" 2>&1 | tail -4
done
