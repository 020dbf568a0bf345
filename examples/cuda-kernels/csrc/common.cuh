// Shared helpers of the archwheel example kernels: error handling and device buffers.
//
// Every exported function is `extern "C"`, takes host pointers, and returns a cudaError_t as an
// int (0 = success), so the Python side can load the library with ctypes and needs no headers.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#define AWX_EXPORT extern "C" __attribute__((visibility("default")))

#define AWX_TRY(expr)                       \
    do {                                    \
        cudaError_t awx_status_ = (expr);   \
        if (awx_status_ != cudaSuccess) {   \
            return static_cast<int>(awx_status_); \
        }                                   \
    } while (0)

namespace awx {

// A device allocation freed on scope exit, so early returns never leak.
template <typename T>
class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() {
        if (ptr_ != nullptr) {
            cudaFree(ptr_);
        }
    }

    cudaError_t allocate(std::size_t count) {
        count_ = count;
        return cudaMalloc(reinterpret_cast<void**>(&ptr_), (count ? count : 1) * sizeof(T));
    }
    cudaError_t upload(const T* host) {
        return cudaMemcpy(ptr_, host, count_ * sizeof(T), cudaMemcpyHostToDevice);
    }
    cudaError_t download(T* host) const {
        return cudaMemcpy(host, ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost);
    }
    T* get() const { return ptr_; }
    std::size_t size() const { return count_; }

  private:
    T* ptr_ = nullptr;
    std::size_t count_ = 0;
};

inline unsigned int blocks_for(std::size_t n, unsigned int threads) {
    std::size_t blocks = (n + threads - 1) / threads;
    if (blocks == 0) {
        blocks = 1;
    }
    if (blocks > 65535u * 16u) {
        blocks = 65535u * 16u;  // grid-stride loops cover the rest
    }
    return static_cast<unsigned int>(blocks);
}

// Synchronize and surface both launch errors and asynchronous execution errors.
inline cudaError_t finish_launch() {
    cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) {
        return status;
    }
    return cudaDeviceSynchronize();
}

}  // namespace awx
