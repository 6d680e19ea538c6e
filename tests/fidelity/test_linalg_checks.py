"""Linear algebra raises where CUDA raises, at the call: CUDA's eigen and singular value
decompositions read their LAPACK info on the host (so do inv, solve, cholesky, lu_factor through
_linalg_check_errors), so a matrix that does not converge, is singular or not positive-definite
raises torch.linalg.LinAlgError (or CPU's RuntimeError) at the call, with CPU's message, and
try/except around the call sees it. The _ex variants never raise. Before: svd, svdvals, eigh,
eigvalsh, eig, matrix_rank, pinv, cond and matrix_norm(ord=2) raised at a later synchronize.
(cpp/backend/checks/host_checked_results.h)"""

import pytest
import torch

LA = torch.linalg

FUNCTIONS = {
    "svd": LA.svd,
    "svdvals": LA.svdvals,
    "torch.svd": torch.svd,
    "eigh": LA.eigh,
    "eigvalsh": LA.eigvalsh,
    "eig": LA.eig,
    "matrix_rank": LA.matrix_rank,
    "matrix_rank hermitian": lambda a: LA.matrix_rank(a, hermitian=True),
    "pinv": LA.pinv,
    "cond": LA.cond,
    "matrix_norm 2": lambda a: LA.matrix_norm(a, 2),
    "inv": LA.inv,
    "solve": lambda a: LA.solve(a, a),
    "cholesky": LA.cholesky,
    "lu_factor": LA.lu_factor,
    "inv_ex": LA.inv_ex,
    "cholesky_ex": LA.cholesky_ex,
    "det": LA.det,
    "qr": LA.qr,
}
INPUTS = {
    "non-finite": lambda: torch.full((3, 3), float("nan")),
    "singular": lambda: torch.zeros(3, 3),
    "batched, one singular": lambda: torch.stack([torch.eye(3), torch.zeros(3, 3)]),
    "well-conditioned": lambda: torch.eye(3) * 2 + 0.1,
}


def outcome(fn, a):
    try:
        result = fn(a)
    except RuntimeError as e:
        return type(e), str(e)
    return None, result


@pytest.mark.parametrize("input_name", list(INPUTS))
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_linalg_raises_what_cpu_raises_at_the_call(name, input_name):
    fn, a = FUNCTIONS[name], INPUTS[input_name]()
    cpu_type, cpu = outcome(fn, a)
    got_type, got = outcome(fn, a.to("vdev"))  # an error queued for later would return here
    assert got_type is cpu_type, (got_type, got, cpu_type, cpu)
    if cpu_type is not None:
        assert got == cpu
    torch.vdev.synchronize()  # and nothing fails later


def test_eigvals_of_a_non_finite_matrix_raises_instead_of_crashing():
    # CPU's LAPACK (MKL geev) ends the process with a segmentation fault on this matrix; CUDA's
    # cuSOLVER does not. linalg.eig refuses it first; vdev refuses it for eigvals as eig does.
    x = torch.full((3, 3), float("inf"), device="vdev")
    with pytest.raises(RuntimeError, match="eigvals: input tensor should not contain infs or NaN"):
        LA.eigvals(x)
    torch.testing.assert_close(
        LA.eigvals(torch.eye(2, device="vdev") * 3).cpu(), torch.full((2,), 3 + 0j)
    )
