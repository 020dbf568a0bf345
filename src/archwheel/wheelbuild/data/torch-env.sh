#!/bin/sh
# Install a pinned torch, and the CUDA toolkit it pins, into an archwheel builder image's
# virtual environment (run once per torch image, as root, by archwheel's build/toolkit.py; the
# container is then committed as archwheel/torch:<hash>).
# Inputs (environment): TORCH_WHEEL (the cached wheel, mounted), TOOLKIT_REQUIREMENT (e.g.
# cuda-toolkit[cublas,...,nvcc,nvvm]==13.0.3; empty: keep the image's own toolkit),
# EXTRA_PACKAGES (e.g. ninja), PYPI_PREFIX (nvidia/cu13), CUDART_SONAME (libcudart.so.13).
set -eu
die() { echo "archwheel-torch-env: error: $*" >&2; exit 1; }
: "${TORCH_WHEEL:?}" "${PYPI_PREFIX:=nvidia/cu13}" "${CUDART_SONAME:=libcudart.so.13}"
TOOLKIT_REQUIREMENT=${TOOLKIT_REQUIREMENT:-}
EXTRA_PACKAGES=${EXTRA_PACKAGES:-}
PY=/opt/archwheel/venv/bin/python

set -- "$TORCH_WHEEL"
[ -n "$TOOLKIT_REQUIREMENT" ] && set -- "$@" "$TOOLKIT_REQUIREMENT"
# shellcheck disable=SC2086
"$PY" -m pip install --progress-bar off --no-cache-dir --no-compile "$@" $EXTRA_PACKAGES \
    || die "pip could not install $TORCH_WHEEL ${TOOLKIT_REQUIREMENT} ${EXTRA_PACKAGES}"
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

if [ -n "$TOOLKIT_REQUIREMENT" ]; then
    root="$site/$PYPI_PREFIX"
    [ -x "$root/bin/nvcc" ] || die "$TOOLKIT_REQUIREMENT did not provide $root/bin/nvcc"
    # The headers torch's own headers include (ATen/cuda/CUDAContextLight.h).
    for h in cuda_runtime_api.h cusparse.h cublas_v2.h cublasLt.h cusolverDn.h; do
        [ -f "$root/include/$h" ] || die "$TOOLKIT_REQUIREMENT did not provide include/$h"
    done
    # The PyPI layout is not a complete CUDA_HOME: lib64 -> lib, and unversioned libraries
    # (-lcudart from $CUDA_HOME/lib64; CMake's FindCUDAToolkit looks for libcublas.so ...).
    [ -e "$root/lib64" ] || ln -s lib "$root/lib64"
    for lib in "$root"/lib/lib*.so.*; do
        [ -e "$lib" ] || continue
        base=${lib%%.so.*}.so
        [ -e "$base" ] || ln -s "$(basename "$lib")" "$base"
    done
    [ -e "$root/lib/libcudart.so" ] || die "no $CUDART_SONAME in $root/lib"
    rm -rf /usr/local/cuda
    ln -s "$root" /usr/local/cuda
fi
"$PY" - <<'EOF'
import torch, torch.version
print("torch_version=" + torch.__version__)
print("torch_cuda=" + str(torch.version.cuda))
EOF
echo "site_packages=$site"
echo "cuda_home=$(readlink -f /usr/local/cuda)"
