// Tiled matrix multiplication C = A * B (row-major) through shared memory, templated over the
// dtype and the tile size; the tile is chosen at run time.
#include "common.cuh"

namespace awx {

template <typename T, int Tile>
__global__ void matmul_kernel(int m, int n, int k, const T* __restrict__ a,
                              const T* __restrict__ b, T* __restrict__ c) {
    __shared__ T tile_a[Tile][Tile];
    __shared__ T tile_b[Tile][Tile + 1];  // +1 avoids shared-memory bank conflicts
    const int row = blockIdx.y * Tile + threadIdx.y;
    const int col = blockIdx.x * Tile + threadIdx.x;
    T acc = T(0);
    for (int t = 0; t < (k + Tile - 1) / Tile; ++t) {
        const int a_col = t * Tile + threadIdx.x;
        const int b_row = t * Tile + threadIdx.y;
        tile_a[threadIdx.y][threadIdx.x] = (row < m && a_col < k) ? a[row * k + a_col] : T(0);
        tile_b[threadIdx.y][threadIdx.x] = (b_row < k && col < n) ? b[b_row * n + col] : T(0);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < Tile; ++i) {
            acc += tile_a[threadIdx.y][i] * tile_b[i][threadIdx.x];
        }
        __syncthreads();
    }
    if (row < m && col < n) {
        c[row * n + col] = acc;
    }
}

template <typename T, int Tile>
int matmul_tiled(int m, int n, int k, const T* a, const T* b, T* c) {
    DeviceBuffer<T> da;
    DeviceBuffer<T> db;
    DeviceBuffer<T> dc;
    AWX_TRY(da.allocate(static_cast<std::size_t>(m) * k));
    AWX_TRY(db.allocate(static_cast<std::size_t>(k) * n));
    AWX_TRY(dc.allocate(static_cast<std::size_t>(m) * n));
    AWX_TRY(da.upload(a));
    AWX_TRY(db.upload(b));
    const dim3 threads(Tile, Tile);
    const dim3 blocks((n + Tile - 1) / Tile, (m + Tile - 1) / Tile);
    matmul_kernel<T, Tile><<<blocks, threads>>>(m, n, k, da.get(), db.get(), dc.get());
    AWX_TRY(finish_launch());
    AWX_TRY(dc.download(c));
    return 0;
}

template <typename T>
int matmul(int m, int n, int k, int tile, const T* a, const T* b, T* c) {
    if (m <= 0 || n <= 0 || k <= 0) {
        return static_cast<int>(cudaErrorInvalidValue);
    }
    switch (tile) {
        case 8:
            return matmul_tiled<T, 8>(m, n, k, a, b, c);
        case 16:
            return matmul_tiled<T, 16>(m, n, k, a, b, c);
        case 32:
            return matmul_tiled<T, 32>(m, n, k, a, b, c);
        default:
            return static_cast<int>(cudaErrorInvalidValue);
    }
}

}  // namespace awx

AWX_EXPORT int awx_matmul_f32(int m, int n, int k, int tile, const float* a, const float* b,
                              float* c) {
    return awx::matmul<float>(m, n, k, tile, a, b, c);
}
AWX_EXPORT int awx_matmul_f64(int m, int n, int k, int tile, const double* a, const double* b,
                              double* c) {
    return awx::matmul<double>(m, n, k, tile, a, b, c);
}
