// The CUDA kernel of archwheel_stable_ops::axpy, on torch's current CUDA stream, through the
// stable C shims only (aoti_torch_get_current_cuda_stream: in every release since 2.10).
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cuda_runtime.h>

#include <cstdint>

#include "axpy.h"

using torch::stable::Tensor;
using torch::headeronly::ScalarType;

namespace archwheel_stable_ops {
namespace {

template <typename T>
__global__ void axpy_kernel(const T* x, const T* y, T* out, int64_t n, T alpha) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = alpha * x[i] + y[i];
  }
}

template <typename T>
void launch(const Tensor& x, const Tensor& y, Tensor& out, T alpha, cudaStream_t stream) {
  const int64_t n = x.numel();
  const int threads = 256;
  const unsigned int blocks = static_cast<unsigned int>((n + threads - 1) / threads);
  if (n == 0) {
    return;
  }
  axpy_kernel<T><<<blocks, threads, 0, stream>>>(
      x.const_data_ptr<T>(), y.const_data_ptr<T>(), out.mutable_data_ptr<T>(), n, alpha);
  cudaError_t status = cudaGetLastError();
  STD_TORCH_CHECK(status == cudaSuccess, "axpy (CUDA kernel): ", cudaGetErrorString(status));
}

Tensor axpy_cuda(Tensor x, Tensor y, double alpha) {
  check_inputs(x, y);
  STD_TORCH_CHECK(x.is_cuda() && y.is_cuda(), "axpy (CUDA kernel): tensors on a GPU");
  torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  void* stream = nullptr;
  STD_TORCH_CHECK(
      aoti_torch_get_current_cuda_stream(x.get_device_index(), &stream) == AOTI_TORCH_SUCCESS,
      "axpy (CUDA kernel): no current CUDA stream");
  Tensor out = torch::stable::empty_like(x);
  if (x.scalar_type() == ScalarType::Float) {
    launch<float>(x, y, out, static_cast<float>(alpha), static_cast<cudaStream_t>(stream));
  } else {
    launch<double>(x, y, out, alpha, static_cast<cudaStream_t>(stream));
  }
  return out;
}

}  // namespace
}  // namespace archwheel_stable_ops

STABLE_TORCH_LIBRARY_IMPL(archwheel_stable_ops, CUDA, m) {
  m.impl("axpy", TORCH_BOX(&archwheel_stable_ops::axpy_cuda));
}
