// What CUDA has no kernel for, refused at the call with CUDA's error, although CPU's kernel (which
// vdev runs) would compute it: a program that runs on vdev must run on a GPU.
//
//  * Integer (and bool) matrix products: CUDA's GEMM and GEMV kernels dispatch on floating and
//    complex types only (AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2 in cuda/Blas.cpp), so
//    torch.mm of int64 raises NotImplementedError "\"addmm_cuda\" not implemented for 'Long'"
//    (bmm/baddbmm: "baddbmm_cuda", mv/addmv: "addmv_impl_cuda", dot, vdot), after the early
//    returns CUDA makes without dispatching (an empty result, an inner dimension of 0).
//  * torch.histogram and histogramdd: CPU kernels only (native_functions.yaml); the dispatcher
//    raises NotImplementedError "Could not run 'aten::histogram.bin_ct' with arguments from the
//    'CUDA' backend ...". (histc has a CUDA kernel.)
//
// Thread rules: stateless; on the dispatching thread.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace vdev::backend {

// Raises CUDA's NotImplementedError for the call on top of `stack` if CUDA cannot run it.
void refuse_what_cuda_cannot_run(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

}  // namespace vdev::backend
