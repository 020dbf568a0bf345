// archwheel_torch_ops: torch.ops.archwheel.axpy(x, y, alpha) = alpha * x + y, with a CPU
// kernel here and a CUDA kernel in ops_cuda.cu, registered through the dispatcher.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

namespace archwheel_ops {

at::Tensor axpy_cuda(const at::Tensor& x, const at::Tensor& y, double alpha);

at::Tensor axpy_cpu(const at::Tensor& x, const at::Tensor& y, double alpha) {
  TORCH_CHECK(x.sizes() == y.sizes(), "axpy: x and y must have the same shape");
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), "axpy: x and y must have the same dtype");
  auto xc = x.contiguous();
  auto yc = y.contiguous();
  auto out = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "axpy_cpu", [&] {
    const scalar_t* px = xc.data_ptr<scalar_t>();
    const scalar_t* py = yc.data_ptr<scalar_t>();
    scalar_t* po = out.data_ptr<scalar_t>();
    const auto a = static_cast<scalar_t>(alpha);
    for (int64_t i = 0; i < xc.numel(); ++i) po[i] = a * px[i] + py[i];
  });
  return out;
}

}  // namespace archwheel_ops

TORCH_LIBRARY(archwheel, m) { m.def("axpy(Tensor x, Tensor y, float alpha) -> Tensor"); }
TORCH_LIBRARY_IMPL(archwheel, CPU, m) { m.impl("axpy", &archwheel_ops::axpy_cpu); }
TORCH_LIBRARY_IMPL(archwheel, CUDA, m) { m.impl("axpy", &archwheel_ops::axpy_cuda); }
