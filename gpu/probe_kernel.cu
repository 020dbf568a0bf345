// archwheel GPU truth table: one tiny kernel, built for one arch list per case.
//
// The kernel writes out[i] = 3*i + 1 and, from thread 0, the __CUDA_ARCH__ it was compiled for
// (arch_out). For a cubin that is the real arch (900 on an H200 from sm_90); for PTX the driver
// JIT-compiled, it is the virtual arch of the PTX (800 from compute_80): the evidence of which
// image served the launch.
//
// Two routes load it, like the two kinds of code in a wheel:
//   * the fatbin (nvcc -fatbin) through the driver API, cuModuleLoadData, from Python's ctypes;
//   * a shared library (nvcc -shared, static cudart) through the runtime API, like a PyTorch
//     extension: archwheel_probe_launch() launches and returns the cudaError_t.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" __global__ void archwheel_probe(int* out, int n, int* arch_out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 3 * i + 1;
    if (i == 0) {
#ifdef __CUDA_ARCH__
        *arch_out = __CUDA_ARCH__;
#endif
    }
}

// Returns the cudaError_t of the first failing call (0 on success). On success *arch is the
// __CUDA_ARCH__ the kernel ran with and *bad the number of wrong output values.
extern "C" int archwheel_probe_launch(int* arch, int* bad, char* message, int message_len) {
    const int n = 1024;
    int *d_out = nullptr, *d_arch = nullptr;
    int host[1024];
    cudaError_t err = cudaMalloc(&d_out, n * sizeof(int));
    if (err == cudaSuccess) err = cudaMalloc(&d_arch, sizeof(int));
    if (err == cudaSuccess) err = cudaMemset(d_arch, 0, sizeof(int));
    if (err == cudaSuccess) {
        archwheel_probe<<<(n + 255) / 256, 256>>>(d_out, n, d_arch);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err == cudaSuccess) err = cudaMemcpy(host, d_out, n * sizeof(int), cudaMemcpyDeviceToHost);
    if (err == cudaSuccess) err = cudaMemcpy(arch, d_arch, sizeof(int), cudaMemcpyDeviceToHost);
    if (err == cudaSuccess) {
        *bad = 0;
        for (int i = 0; i < n; ++i) *bad += host[i] != 3 * i + 1;
    }
    if (message && message_len > 0) {
        snprintf(message, message_len, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
    }
    if (d_out) cudaFree(d_out);
    if (d_arch) cudaFree(d_arch);
    return (int)err;
}
