// The CUDA kernel of torch.ops.archwheel.axpy. Including ATen/cuda/CUDAContext.h pulls in
// cuSPARSE, cuBLAS, cuBLASLt and cuSOLVER headers: the toolkit must be complete.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

namespace archwheel_ops {

template <typename T>
__global__ void axpy_kernel(const T* x, const T* y, T* out, T alpha, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = alpha * x[i] + y[i];
  }
}

at::Tensor axpy_cuda(const at::Tensor& x, const at::Tensor& y, double alpha) {
  TORCH_CHECK(x.sizes() == y.sizes(), "axpy: x and y must have the same shape");
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), "axpy: x and y must have the same dtype");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto yc = y.contiguous();
  auto out = at::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 4096));
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "axpy_cuda", [&] {
    axpy_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<scalar_t>(), yc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
        static_cast<scalar_t>(alpha), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace archwheel_ops
