// Reductions: sum and max with warp shuffles and shared memory, templated over dtype and op.
#include <cfloat>
#include <climits>

#include "common.cuh"

namespace awx {

template <typename T>
struct SumOp {
    __device__ static T identity() { return T(0); }
    __device__ static T apply(T a, T b) { return a + b; }
};

template <typename T>
struct MaxOp;

template <>
struct MaxOp<float> {
    __device__ static float identity() { return -FLT_MAX; }
    __device__ static float apply(float a, float b) { return fmaxf(a, b); }
};
template <>
struct MaxOp<double> {
    __device__ static double identity() { return -DBL_MAX; }
    __device__ static double apply(double a, double b) { return fmax(a, b); }
};
template <>
struct MaxOp<int> {
    __device__ static int identity() { return INT_MIN; }
    __device__ static int apply(int a, int b) { return a > b ? a : b; }
};
template <>
struct MaxOp<long long> {
    __device__ static long long identity() { return LLONG_MIN; }
    __device__ static long long apply(long long a, long long b) { return a > b ? a : b; }
};

template <typename T, typename Op>
__device__ T warp_reduce(T value) {
    for (int offset = 16; offset > 0; offset /= 2) {
        value = Op::apply(value, __shfl_down_sync(0xffffffffu, value, offset));
    }
    return value;
}

// One partial result per block; a second launch with a single block folds the partials.
template <typename T, typename Op, unsigned int Threads>
__global__ void reduce_kernel(std::size_t n, const T* __restrict__ in, T* __restrict__ out) {
    __shared__ T warp_results[Threads / 32];
    T value = Op::identity();
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(Threads) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * Threads) {
        value = Op::apply(value, in[i]);
    }
    value = warp_reduce<T, Op>(value);
    const unsigned int lane = threadIdx.x % 32;
    const unsigned int warp = threadIdx.x / 32;
    if (lane == 0) {
        warp_results[warp] = value;
    }
    __syncthreads();
    if (warp == 0) {
        value = lane < Threads / 32 ? warp_results[lane] : Op::identity();
        value = warp_reduce<T, Op>(value);
        if (lane == 0) {
            out[blockIdx.x] = value;
        }
    }
}

template <typename T, typename Op>
int reduce(std::size_t n, const T* x, T* result) {
    constexpr unsigned int threads = 256;
    const unsigned int blocks = blocks_for(n, threads) > 1024 ? 1024 : blocks_for(n, threads);
    DeviceBuffer<T> din;
    DeviceBuffer<T> partial;
    DeviceBuffer<T> total;
    AWX_TRY(din.allocate(n));
    AWX_TRY(partial.allocate(blocks));
    AWX_TRY(total.allocate(1));
    AWX_TRY(din.upload(x));
    reduce_kernel<T, Op, threads><<<blocks, threads>>>(n, din.get(), partial.get());
    AWX_TRY(cudaGetLastError());
    reduce_kernel<T, Op, threads><<<1, threads>>>(blocks, partial.get(), total.get());
    AWX_TRY(finish_launch());
    AWX_TRY(total.download(result));
    return 0;
}

}  // namespace awx

#define AWX_REDUCE(name, type)                                                              \
    AWX_EXPORT int awx_sum_##name(std::size_t n, const type* x, type* out) {                \
        return awx::reduce<type, awx::SumOp<type>>(n, x, out);                              \
    }                                                                                       \
    AWX_EXPORT int awx_max_##name(std::size_t n, const type* x, type* out) {                \
        return awx::reduce<type, awx::MaxOp<type>>(n, x, out);                              \
    }

AWX_REDUCE(f32, float)
AWX_REDUCE(f64, double)
AWX_REDUCE(i32, int)
AWX_REDUCE(i64, long long)
