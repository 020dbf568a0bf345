#!/bin/sh
# Print the toolchain of an archwheel builder image as key=value lines (read by archwheel and
# recorded in provenance). Never fails: a missing tool prints an empty value.
first_line() { "$@" 2>&1 | sed -n '1p'; }
echo "nvcc=$(/usr/local/cuda/bin/nvcc --version 2>/dev/null | grep -i 'release' | tail -n 1)"
echo "cuda_home=$(readlink -f /usr/local/cuda 2>/dev/null)"
echo "gcc=$(first_line g++ --version)"
echo "python=$(first_line /opt/archwheel/venv/bin/python --version)"
echo "pip=$(first_line /opt/archwheel/venv/bin/python -m pip --version | cut -d' ' -f1-2)"
if [ -x /opt/archwheel/sccache/sccache ]; then echo "sccache=$(first_line /opt/archwheel/sccache/sccache --version)"; else echo "sccache=none"; fi
echo "glibc=$(first_line ldd --version)"
echo "os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
echo "toolchain_source=$(cat /opt/archwheel/toolchain-source 2>/dev/null)"
