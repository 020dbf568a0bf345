#!/bin/sh
# Provision an archwheel builder image (run once by docker/Dockerfile, as root).
# Inputs (environment): TOOLCHAIN_SOURCE image|pypi, CUDA_VERSION X.Y, PYTHON_VERSION X.Y,
# PYPI_PREFIX (e.g. nvidia/cu13), CUDART_SONAME, SYSTEM_PACKAGES (extra distribution packages),
# APT_COMPONENTS (archive components added to the base's own apt entries: contrib, non-free),
# STAND_INS (empty packages installed in their place: what the recipe provides otherwise).
set -eu

log() { echo "archwheel-provision: $*"; }
die() { echo "archwheel-provision: error: $*" >&2; exit 1; }

: "${TOOLCHAIN_SOURCE:?}" "${CUDA_VERSION:?}" "${PYTHON_VERSION:?}"
PYPI_PREFIX=${PYPI_PREFIX:-}
CUDART_SONAME=${CUDART_SONAME:-}
SYSTEM_PACKAGES=${SYSTEM_PACKAGES:-}
APT_COMPONENTS=${APT_COMPONENTS:-}
STAND_INS=${STAND_INS:-}
AW=/opt/archwheel
mkdir -p "$AW/bin"

# -- system packages: only what is missing ------------------------------------------------------
missing=""
command -v g++ >/dev/null 2>&1 || missing="$missing cxx"
command -v git >/dev/null 2>&1 || missing="$missing git"
command -v tar >/dev/null 2>&1 || missing="$missing tar"
command -v make >/dev/null 2>&1 || missing="$missing make"
# 3.14t: free-threaded CPython, ABI cp314t (manylinux: /opt/python/cp314-cp314t/bin/python3.14t)
py_tag="cp$(echo "${PYTHON_VERSION%t}" | tr -d .)"
case "$PYTHON_VERSION" in *t) abi_tag="${py_tag}t" ;; *) abi_tag=$py_tag ;; esac
find_python() {
    for candidate in "/opt/python/$py_tag-$abi_tag/bin/python$PYTHON_VERSION" \
        "/opt/python/$py_tag-$abi_tag/bin/python3" "/usr/bin/python$PYTHON_VERSION" \
        "/usr/local/bin/python$PYTHON_VERSION"; do
        if [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
    done
    command -v "python$PYTHON_VERSION" 2>/dev/null || return 1
}
python_bin=$(find_python || true)
if [ -z "$python_bin" ] || ! "$python_bin" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    missing="$missing python"
fi

if [ -n "$missing$SYSTEM_PACKAGES" ]; then
    log "installing:$missing $SYSTEM_PACKAGES"
    if command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        pkgs="ca-certificates"
        for m in $missing; do
            case $m in
                cxx) pkgs="$pkgs g++" ;;
                python) pkgs="$pkgs python$PYTHON_VERSION python$PYTHON_VERSION-venv python$PYTHON_VERSION-dev" ;;
                *) pkgs="$pkgs $m" ;;
            esac
        done
        if [ -n "$APT_COMPONENTS" ]; then
            # the base's own archive entries, with the components the recipe adds
            log "apt components added: $APT_COMPONENTS"
            for list in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
                if [ -f "$list" ]; then sed -i "/^deb / s/\$/ $APT_COMPONENTS/" "$list"; fi
            done
            for list in /etc/apt/sources.list.d/*.sources; do
                if [ -f "$list" ]; then sed -i "/^Components:/ s/\$/ $APT_COMPONENTS/" "$list"; fi
            done
        fi
        for name in $STAND_INS; do
            # an empty package in the place of one the recipe provides otherwise (cuDNN from the
            # package index for Debian's nvidia-cudnn, an installer that downloads from NVIDIA):
            # what depends on it installs, nothing of it is installed
            log "stand-in package: $name"
            standin=$(mktemp -d)
            mkdir "$standin/DEBIAN"
            printf 'Package: %s\nVersion: 9999-archwheel\nArchitecture: all\nMaintainer: archwheel\nDescription: stand-in: the recipe provides %s otherwise\n' \
                "$name" "$name" > "$standin/DEBIAN/control"
            dpkg-deb --build "$standin" "$standin.deb" >/dev/null
            dpkg -i "$standin.deb" >/dev/null
            rm -rf "$standin" "$standin.deb"
        done
        apt-get update -qq
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $pkgs $SYSTEM_PACKAGES \
            || die "apt-get could not install:$pkgs $SYSTEM_PACKAGES (is Python $PYTHON_VERSION packaged for this distribution?)"
        rm -rf /var/lib/apt/lists/*
    elif command -v dnf >/dev/null 2>&1 || command -v yum >/dev/null 2>&1; then
        pm=$(command -v dnf || command -v yum)
        pkgs=""
        for m in $missing; do
            case $m in
                cxx) pkgs="$pkgs gcc-c++" ;;
                python) pkgs="$pkgs python$(echo "$PYTHON_VERSION" | tr -d .) python$PYTHON_VERSION" ;;
                *) pkgs="$pkgs $m" ;;
            esac
        done
        if [ -n "$pkgs$SYSTEM_PACKAGES" ]; then
            # shellcheck disable=SC2086
            "$pm" install -y $pkgs $SYSTEM_PACKAGES || die "$pm could not install:$pkgs $SYSTEM_PACKAGES"
        fi
        "$pm" clean all >/dev/null 2>&1 || true
    else
        die "no apt-get, dnf or yum in the base image to install:$missing"
    fi
fi

# -- Python -------------------------------------------------------------------------------------
python_bin=$(find_python) || die "Python $PYTHON_VERSION is not available in this base image"
"$python_bin" -m venv "$AW/venv" || die "$python_bin cannot create a virtual environment"
log "python: $("$AW/venv/bin/python" --version 2>&1) from $python_bin"

# -- the CUDA toolkit ---------------------------------------------------------------------------
case $TOOLCHAIN_SOURCE in
pypi)
    ls "$AW"/toolchain-wheels/*.whl >/dev/null 2>&1 || die "no toolchain wheels in the build context"
    "$AW/venv/bin/python" -m pip install --quiet --no-index --no-deps --no-compile \
        --target "$AW/cuda-pypi" "$AW"/toolchain-wheels/*.whl
    root="$AW/cuda-pypi/$PYPI_PREFIX"
    [ -x "$root/bin/nvcc" ] || die "the toolchain wheels did not provide $root/bin/nvcc"
    # The PyPI layout is not a complete CUDA_HOME: add lib64 -> lib and the unversioned cudart.
    [ -e "$root/lib64" ] || ln -s lib "$root/lib64"
    if [ -n "$CUDART_SONAME" ] && [ -e "$root/lib/$CUDART_SONAME" ] && [ ! -e "$root/lib/libcudart.so" ]; then
        ln -s "$CUDART_SONAME" "$root/lib/libcudart.so"
    fi
    # A toolkit's lib64 has the linker names (libcublas.so, ...); the wheels only the sonames
    # (libcublas.so.13, libcudnn.so.9): -lNAME and CMake's find_library need the former.
    for so in "$AW"/cuda-pypi/nvidia/*/lib/lib*.so.[0-9]*; do
        [ -e "$so" ] || continue
        link=${so%%.so.*}.so
        [ -e "$link" ] || ln -s "$(basename "$so")" "$link"
    done
    rm -rf /usr/local/cuda
    ln -s "$root" /usr/local/cuda
    ;;
image)
    # The same search archwheel ran in the base image before building this one (find-cuda.sh).
    root=$(sh "$AW/find-cuda.sh" "$CUDA_VERSION") \
        || die "TOOLCHAIN_SOURCE=image but the base image has no nvcc (/usr/local/cuda-$CUDA_VERSION, /usr/local/cuda or PATH)"
    if [ "$(readlink -f /usr/local/cuda 2>/dev/null)" != "$root" ]; then
        # Images with several toolkits: point /usr/local/cuda at the one the recipe asks for.
        rm -rf /usr/local/cuda
        ln -s "$root" /usr/local/cuda
    fi
    log "toolkit: $root"
    ;;
*)
    die "unknown TOOLCHAIN_SOURCE $TOOLCHAIN_SOURCE (image or pypi)"
    ;;
esac
rm -rf "$AW/toolchain-wheels"
echo "$TOOLCHAIN_SOURCE" > "$AW/toolchain-source"
/usr/local/cuda/bin/nvcc --version | tail -n 2
chmod 755 "$AW/probe.sh" "$AW/find-cuda.sh"
log "done"
