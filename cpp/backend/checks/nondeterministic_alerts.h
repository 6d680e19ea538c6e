// torch.use_deterministic_algorithms(True) on vdev: the operators CUDA has no deterministic kernel
// for raise (or, with warn_only=True, warn) at the call, as on CUDA.
//
// vdev computes with CPU's kernels, which are deterministic, so without this a program that CUDA
// rejects in deterministic mode would pass on vdev. The table (nondeterministic_alerts.cpp) lists
// every at::globalContext().alertNotDeterministic() call of ATen's CUDA kernels with its
// condition and CUDA's own caller string, so messages and PyTorch's tests' expectations match.
// Where PyTorch's Python front end takes a deterministic decomposition for CUDA tensors only
// (F.pad with mode="replicate": `input.is_cuda or input.is_xpu` in torch/nn/functional.py), the
// CUDA program never reaches the alerting kernel, so vdev does not alert either. max_pool3d's
// backward is not listed: torch 2.13's use_deterministic_algorithms documentation lists MaxPool3d
// among the operations that act deterministically on CUDA (F.max_pool3d with return_indices=True
// decomposes for CUDA tensors); whether max_pool3d_with_indices_backward_cuda still alerts when
// reached directly was not verified on a GPU.
//
// Thread rules: called on the host thread that dispatches the operator; the table is immutable.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace vdev::backend {

// Raises (or warns) through at::Context::alertNotDeterministic when deterministic algorithms are
// on and CUDA's kernel for `op` with these arguments has no deterministic implementation. A
// single relaxed load when deterministic mode is off.
void alert_where_cuda_is_nondeterministic(const c10::OperatorHandle& op,
                                          const torch::jit::Stack& stack);

}  // namespace vdev::backend
