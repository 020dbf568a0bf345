// archwheel's stable-ABI example: y + alpha * x, as a torch operator written only against
// torch's stable ABI (torch/csrc/stable, torch/headeronly). setup.py compiles it with
// TORCH_TARGET_VERSION set to the oldest torch it serves (2.12), so the headers use only the
// stable C shims that release already has, and TORCH_STABLE_ONLY refuses any other header.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdint>

#include "axpy.h"

using torch::stable::Tensor;
using torch::headeronly::ScalarType;

namespace archwheel_stable_ops {

void check_inputs(const Tensor& x, const Tensor& y) {
  STD_TORCH_CHECK(x.numel() == y.numel(), "axpy: x and y must have as many elements");
  STD_TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "axpy: x and y must be contiguous");
  STD_TORCH_CHECK(x.scalar_type() == y.scalar_type(), "axpy: x and y must have one dtype");
  STD_TORCH_CHECK(
      x.scalar_type() == ScalarType::Float || x.scalar_type() == ScalarType::Double,
      "axpy: float32 or float64 only");
}

namespace {

template <typename T>
void axpy_loop(const T* x, const T* y, T* out, int64_t n, T alpha) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = alpha * x[i] + y[i];
  }
}

Tensor axpy_cpu(Tensor x, Tensor y, double alpha) {
  check_inputs(x, y);
  STD_TORCH_CHECK(x.is_cpu() && y.is_cpu(), "axpy (CPU kernel): tensors on the CPU");
  Tensor out = torch::stable::empty_like(x);
  if (x.scalar_type() == ScalarType::Float) {
    axpy_loop(x.const_data_ptr<float>(), y.const_data_ptr<float>(),
              out.mutable_data_ptr<float>(), x.numel(), static_cast<float>(alpha));
  } else {
    axpy_loop(x.const_data_ptr<double>(), y.const_data_ptr<double>(),
              out.mutable_data_ptr<double>(), x.numel(), alpha);
  }
  return out;
}

}  // namespace
}  // namespace archwheel_stable_ops

STABLE_TORCH_LIBRARY(archwheel_stable_ops, m) {
  m.def("axpy(Tensor x, Tensor y, float alpha) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(archwheel_stable_ops, CPU, m) {
  m.impl("axpy", TORCH_BOX(&archwheel_stable_ops::axpy_cpu));
}
