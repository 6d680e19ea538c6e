// Operators whose CUDA kernels read their results on the host and raise at the call: the
// eigen and singular value decompositions check LAPACK's (cuSOLVER's) info inside the kernel
// (at::_linalg_check_errors in _linalg_svd_out, _linalg_eigh_out, linalg_eig_out,
// linalg_eigvals_out), which synchronizes. vdev runs them synchronously too, so a matrix that
// does not converge raises torch.linalg.LinAlgError at the call, where try/except and
// pytest.raises around it see it, instead of at some later synchronize. (inv, solve, cholesky,
// lu_factor and ldl_factor are already checked at the call: their check is a separate operator,
// _linalg_check_errors, that returns nothing and so is never queued.)
//
// CPU's LAPACK (MKL's geev) crashes the process on a non-finite matrix where CUDA's cuSOLVER does
// not; linalg.eig refuses one first, eigvals does not: vdev refuses it for eigvals as eig does.
//
// Thread rules: stateless; on the dispatching thread.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace vdev::backend {

// Whether CUDA's kernel for this operator synchronizes to check its results (see above).
bool reads_results_on_the_host(const c10::FunctionSchema& schema);

// Raises what vdev raises instead of letting CPU's LAPACK crash (see above); the call's arguments
// are on top of `stack`.
void check_before_cpu_lapack(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

}  // namespace vdev::backend
