#!/bin/sh
# Configure as CMake does for ninja: the arch flags of this build baked into each compile rule
# of build/build.ninja. Run in the build's tree with the build's environment.
set -eu
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
mkdir -p build
{
    echo "rule nvcc"
    echo "  command = $nvcc -c \$in -o \$out -O2 -Xcompiler=-fPIC $CUDA_GENCODE_FLAGS"
    echo "rule link"
    echo "  command = g++ -shared -o \$out \$in -L${CUDA_HOME:-/usr/local/cuda}/lib64 -Wl,--exclude-libs,ALL -lcudart_static -lrt -lpthread -ldl"
    for k in a b c; do echo "build obj/$k.o: nvcc $PWD/csrc/$k.cu"; done
    echo "build libkernels.so: link obj/a.o obj/b.o obj/c.o"
} > build/build.ninja.new
# rewritten only when it changes, as CMake does
if cmp -s build/build.ninja.new build/build.ninja; then rm build/build.ninja.new; else mv build/build.ninja.new build/build.ninja; fi
