#!/usr/bin/env bash
# Configure PyTorch from Debian's source package for CUDA, with Debian's settings, and keep the
# build.ninja it writes: the input of `archwheel build-files` and of the recorded test data
# (tests/support/data/pytorch-2.6.0-cuda/). Run as root on a Debian host with docker and
# debootstrap; everything lands in $WORK (outside any git tree).
#
#   benchmarks/pytorch/configure-debian.sh            # 2.6.0+dfsg-7, TORCH_CUDA_ARCH_LIST="8.0;9.0"
#   WORK=/work/pt ARCHS="8.0;9.0;10.0" benchmarks/pytorch/configure-debian.sh
#   STOP_AFTER=build-deps DEPS_IMAGE=archwheel/pytorch-builddeps:check benchmarks/pytorch/...
#
# Stages (each skipped when its result exists; times go to $WORK/timings.txt):
#   1. base image archwheel/debian:trixie (debootstrap --variant=minbase + docker import; what
#      `archwheel base-image --suite trixie` makes);
#   2. the source: a deb-src entry copying the base's deb URIs, `apt-get source --download-only`,
#      `dpkg-source -x` (Debian's patches applied);
#   3. the build-deps image: debian/control.cuda's Build-Depends (--no-install-recommends), the
#      nvidia-cudnn installer removed and cuDNN taken from the package index (nvidia-cudnn-cu12,
#      downloaded on the host into $WORK/wheels, unpacked into /opt/cudnn);
#   4. configure: `python3 setup.py build --cmake-only` with debian/rules' settings, network off.
set -euo pipefail
WORK="${WORK:-/work/pt}"
VERSION="${PYTORCH_VERSION:-2.6.0+dfsg-7}"
ARCHS="${ARCHS:-8.0;9.0}"
SUITE="${SUITE:-trixie}"
BASE="archwheel/debian:$SUITE"
DEPS="${DEPS_IMAGE:-archwheel/pytorch-builddeps:${VERSION//+/_}}"
STOP_AFTER="${STOP_AFTER:-}"  # base-image, source or build-deps: stop after that stage
mkdir -p "$WORK/src" "$WORK/wheels"
log() { printf '[configure-debian] %s\n' "$*"; }
timed() { # timed NAME CMD...: run, append "NAME SECONDS" to timings.txt
  local name=$1 t0; shift; t0=$(date +%s)
  "$@"
  printf '%s %s\n' "$name" "$(( $(date +%s) - t0 ))" | tee -a "$WORK/timings.txt"
}

base_image() {
  docker image inspect "$BASE" >/dev/null 2>&1 && return 0
  [ -x "$WORK/rootfs/usr/bin/apt-get" ] || debootstrap --variant=minbase "$SUITE" "$WORK/rootfs"
  rm -f "$WORK"/rootfs/var/cache/apt/archives/*.deb
  tar --numeric-owner -C "$WORK/rootfs" -c . | docker import \
    --change "LABEL org.archwheel.base=debootstrap-$SUITE" --change "ENV LANG=C.UTF-8" - "$BASE"
}

# The base's deb line with every component (contrib: nvidia-cuda-toolkit; non-free: its
# libraries), and a deb-src line with the same URIs.
SOURCES='sed -n "s/^deb \([^ ]*\) \([^ ]*\) .*/\1 \2/p" /etc/apt/sources.list | head -1 | {
  read -r uri suite
  printf "deb %s %s main contrib non-free non-free-firmware\n" "$uri" "$suite" >/etc/apt/sources.list
  printf "deb-src %s %s main contrib non-free non-free-firmware\n" "$uri" "$suite" >>/etc/apt/sources.list
}'

source_tree() {
  [ -f "$WORK/src/pytorch/setup.py" ] && return 0
  docker run --rm --network host -v "$WORK/src:/src" -e VERSION="$VERSION" "$BASE" bash -euc "
    $SOURCES
    apt-get update -qq && apt-get install -y -qq --no-install-recommends dpkg-dev ca-certificates >/dev/null
    cd /src && apt-get source -qq --download-only \"pytorch=\$VERSION\"
    dpkg-source -x pytorch_*.dsc pytorch"
}

deps_image() {
  docker image inspect "$DEPS" >/dev/null 2>&1 && return 0
  local wheel
  wheel=$(ls "$WORK"/wheels/nvidia_cudnn_cu12-*.whl 2>/dev/null | head -1)
  if [ -z "$wheel" ]; then
    pip download -q --no-deps -d "$WORK/wheels" 'nvidia-cudnn-cu12>=9,<10' --only-binary=:all: \
      --platform manylinux_2_27_x86_64 --python-version 3.13
    wheel=$(ls "$WORK"/wheels/nvidia_cudnn_cu12-*.whl | head -1)
  fi
  docker rm -f pytorch-builddeps >/dev/null 2>&1 || true
  docker run --name pytorch-builddeps --network host -v "$WORK/src:/src:ro" -v "$WORK/wheels:/wheels:ro" \
    -e DEBIAN_FRONTEND=noninteractive "$BASE" bash -euc "
    $SOURCES
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends dpkg-dev equivs unzip >/dev/null
    # nvidia-cudnn downloads cuDNN from NVIDIA in its postinst (fails offline): a stand-in
    # package satisfies the Build-Depends, cuDNN itself comes from the package index below.
    printf \"Section: misc\\nPackage: nvidia-cudnn\\nVersion: 9.99\\nDescription: stand-in, cuDNN from nvidia-cudnn-cu12\\n\" >/tmp/cudnn.ctl
    (cd /tmp && equivs-build cudnn.ctl >/dev/null && dpkg -i nvidia-cudnn_9.99_all.deb >/dev/null)
    mkdir /tmp/deps && cp -r /src/pytorch/debian /tmp/deps/ && cp /tmp/deps/debian/control.cuda /tmp/deps/debian/control
    apt-get build-dep -y --no-install-recommends /tmp/deps >/tmp/build-dep.log 2>&1 || { tail -30 /tmp/build-dep.log; exit 1; }
    tail -3 /tmp/build-dep.log
    mkdir -p /opt/cudnn && cd /opt/cudnn && unzip -q /wheels/$(basename "$wheel")
    lib=/opt/cudnn/nvidia/cudnn/lib
    for so in \$lib/lib*.so.*; do ln -sf \$(basename \$so) \${so%%.so.*}.so; done
    apt-get clean && rm -rf /var/lib/apt/lists/*"
  docker commit pytorch-builddeps "$DEPS" >/dev/null
  docker rm pytorch-builddeps >/dev/null
}

configure() {
  docker run --rm --network none -v "$WORK/src:/src" -e TORCH_CUDA_ARCH_LIST="$ARCHS" -e VERSION="$VERSION" "$DEPS" bash -euc '
    cd /src/pytorch
    ( cd torch/csrc/jit/serialization && flatc --cpp --gen-mutable --scoped-enums mobile_bytecode.fbs )
    export CUDA_HOME=/usr CC=cuda-gcc CXX=cuda-g++ CUDAHOSTCXX=cuda-g++
    rm -rf build
    export USE_SYSTEM_LIBS=ON BLAS=Generic USE_FBGEMM=OFF USE_NNPACK=OFF USE_MKLDNN=ON USE_XNNPACK=ON
    export GENERIC_BLAS_LIBRARIES=blas ONNX_NAMESPACE=onnx USE_GFLAGS=OFF USE_GLOG=OFF USE_KINETO=ON USE_ITT=OFF
    export USE_VULKAN=0 USE_MPI=0 BUILD_TEST=0 CMAKE_BUILD_TYPE=Release
    export USE_CUDA=ON USE_CUDNN=ON USE_SYSTEM_NCCL=ON USE_MAGMA=OFF
    export CUDNN_INCLUDE_DIR=/opt/cudnn/nvidia/cudnn/include CUDNN_LIBRARY=/opt/cudnn/nvidia/cudnn/lib
    export PYTORCH_BUILD_VERSION=${VERSION%%+*} PYTORCH_BUILD_NUMBER=1 MAX_JOBS=2
    time python3 setup.py build --cmake-only'
}

log "work folder $WORK, pytorch $VERSION, TORCH_CUDA_ARCH_LIST=$ARCHS"
timed base-image base_image
timed source source_tree
timed build-deps deps_image
[ "$STOP_AFTER" = build-deps ] && exit 0
timed configure configure
ls -la "$WORK/src/pytorch/build/build.ninja"
