#pragma once

#include <torch/csrc/stable/tensor.h>

namespace archwheel_stable_ops {

// The checks both kernels make (ops.cpp).
void check_inputs(const torch::stable::Tensor& x, const torch::stable::Tensor& y);

}  // namespace archwheel_stable_ops
