// Element-wise kernels: y = a*x + y (axpy) and activation functions, templated over the dtype.
#include <cuda_fp16.h>

#include "common.cuh"

namespace awx {

template <typename T>
struct Math {
    __device__ static float to_float(T v) { return static_cast<float>(v); }
    __device__ static T from_float(float v) { return static_cast<T>(v); }
};

template <>
struct Math<__half> {
    __device__ static float to_float(__half v) { return __half2float(v); }
    __device__ static __half from_float(float v) { return __float2half(v); }
};

template <typename T>
__global__ void axpy_kernel(std::size_t n, T a, const T* __restrict__ x, T* __restrict__ y) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// Half precision computes in float: __half arithmetic needs sm_53+, and float is more accurate.
template <>
__global__ void axpy_kernel<__half>(std::size_t n, __half a, const __half* __restrict__ x,
                                    __half* __restrict__ y) {
    const float af = __half2float(a);
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        y[i] = __float2half(af * __half2float(x[i]) + __half2float(y[i]));
    }
}

struct Relu {
    __device__ float operator()(float v) const { return v > 0.0f ? v : 0.0f; }
};

struct Gelu {  // tanh approximation, as in most frameworks
    __device__ float operator()(float v) const {
        const float c = 0.7978845608028654f;  // sqrt(2/pi)
        return 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
    }
};

struct Sigmoid {
    __device__ float operator()(float v) const { return 1.0f / (1.0f + expf(-v)); }
};

template <typename T, typename Op>
__global__ void map_kernel(std::size_t n, const T* __restrict__ x, T* __restrict__ y, Op op) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        y[i] = Math<T>::from_float(op(Math<T>::to_float(x[i])));
    }
}

template <typename T>
int axpy(std::size_t n, T a, const T* x, T* y) {
    DeviceBuffer<T> dx;
    DeviceBuffer<T> dy;
    AWX_TRY(dx.allocate(n));
    AWX_TRY(dy.allocate(n));
    AWX_TRY(dx.upload(x));
    AWX_TRY(dy.upload(y));
    const unsigned int threads = 256;
    axpy_kernel<T><<<blocks_for(n, threads), threads>>>(n, a, dx.get(), dy.get());
    AWX_TRY(finish_launch());
    AWX_TRY(dy.download(y));
    return 0;
}

template <typename T, typename Op>
int map(std::size_t n, const T* x, T* y, Op op) {
    DeviceBuffer<T> dx;
    DeviceBuffer<T> dy;
    AWX_TRY(dx.allocate(n));
    AWX_TRY(dy.allocate(n));
    AWX_TRY(dx.upload(x));
    const unsigned int threads = 256;
    map_kernel<T, Op><<<blocks_for(n, threads), threads>>>(n, dx.get(), dy.get(), op);
    AWX_TRY(finish_launch());
    AWX_TRY(dy.download(y));
    return 0;
}

template <typename T>
int activation(int which, std::size_t n, const T* x, T* y) {
    switch (which) {
        case 0:
            return map(n, x, y, Relu{});
        case 1:
            return map(n, x, y, Gelu{});
        case 2:
            return map(n, x, y, Sigmoid{});
        default:
            return static_cast<int>(cudaErrorInvalidValue);
    }
}

}  // namespace awx

AWX_EXPORT int awx_axpy_f32(std::size_t n, float a, const float* x, float* y) {
    return awx::axpy<float>(n, a, x, y);
}
AWX_EXPORT int awx_axpy_f64(std::size_t n, double a, const double* x, double* y) {
    return awx::axpy<double>(n, a, x, y);
}
// Half values cross the C boundary as their 16-bit patterns.
AWX_EXPORT int awx_axpy_f16(std::size_t n, unsigned short a, const unsigned short* x,
                            unsigned short* y) {
    __half_raw raw;
    raw.x = a;
    return awx::axpy<__half>(n, __half(raw), reinterpret_cast<const __half*>(x),
                             reinterpret_cast<__half*>(y));
}
AWX_EXPORT int awx_activation_f32(int which, std::size_t n, const float* x, float* y) {
    return awx::activation<float>(which, n, x, y);
}
AWX_EXPORT int awx_activation_f64(int which, std::size_t n, const double* x, double* y) {
    return awx::activation<double>(which, n, x, y);
}
AWX_EXPORT int awx_activation_f16(int which, std::size_t n, const unsigned short* x,
                                  unsigned short* y) {
    return awx::activation<__half>(which, n, reinterpret_cast<const __half*>(x),
                                   reinterpret_cast<__half*>(y));
}
