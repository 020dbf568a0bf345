// One kernel of the resumable-build test project (tests/integration/docker/test_kept_tree.py).
__global__ void kernel_c(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 2.0f + 1.0f;
}

extern "C" int launch_c(float* x, int n) {
    kernel_c<<<(n + 255) / 256, 256>>>(x, n);
    return static_cast<int>(cudaGetLastError());
}
