#!/bin/sh
# Find the CUDA toolkit of an image for CUDA version X.Y, the way archwheel's builder uses it:
#   1. /usr/local/cuda-X.Y, when it holds bin/nvcc (images with several toolkits);
#   2. /usr/local/cuda, when it holds bin/nvcc (nvidia/cuda and pytorch builder images);
#   3. the toolkit of the nvcc on PATH.
# Usage: find-cuda.sh X.Y          prints the toolkit root (symlinks resolved); exit 1 if none
#        find-cuda.sh --probe X.Y  prints cuda_home=ROOT and nvcc=RELEASE LINE (empty if none)
# provision.sh runs it while building the builder image; archwheel runs the same text in the
# base image first (`sh -c`), so a toolkit that is not the recipe's is refused before any
# image is built.
probe=""
if [ "${1:-}" = "--probe" ]; then probe=1; shift; fi
want=${1:?usage: find-cuda.sh [--probe] X.Y}

find_root() {
    for candidate in "/usr/local/cuda-$want" /usr/local/cuda; do
        if [ -x "$candidate/bin/nvcc" ]; then readlink -f "$candidate"; return 0; fi
    done
    nvcc_path=$(command -v nvcc 2>/dev/null) || return 1
    dirname "$(dirname "$(readlink -f "$nvcc_path")")"
}

root=$(find_root) || root=""
if [ -z "$probe" ]; then
    [ -n "$root" ] || exit 1
    echo "$root"
    exit 0
fi
echo "cuda_home=$root"
if [ -n "$root" ]; then
    echo "nvcc=$("$root/bin/nvcc" --version 2>/dev/null | grep -i 'release' | tail -n 1)"
else
    echo "nvcc="
fi
