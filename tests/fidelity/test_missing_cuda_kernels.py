"""What CUDA has no kernel for raises at the call with CUDA's NotImplementedError, although CPU's
kernel (which vdev runs) would compute it: integer matrix products and torch.histogram. A program
that runs on vdev must run on a GPU. (cpp/backend/checks/missing_cuda_kernels.h)"""

import pytest
import torch
import torch.nn.functional as F

D = "vdev"


def t(*shape, dtype=torch.int64):
    return torch.ones(*shape, dtype=dtype, device=D)


PRODUCTS = {
    "mm": (lambda dt: torch.mm(t(2, 3, dtype=dt), t(3, 2, dtype=dt)), "addmm_cuda"),
    "matmul 2-d": (lambda dt: t(2, 3, dtype=dt) @ t(3, 2, dtype=dt), "addmm_cuda"),
    "addmm": (
        lambda dt: torch.addmm(t(2, 2, dtype=dt), t(2, 3, dtype=dt), t(3, 2, dtype=dt)),
        "addmm_cuda",
    ),
    "linear": (lambda dt: F.linear(t(2, 3, dtype=dt), t(4, 3, dtype=dt)), "addmm_cuda"),
    "bmm": (lambda dt: torch.bmm(t(2, 2, 3, dtype=dt), t(2, 3, 2, dtype=dt)), "baddbmm_cuda"),
    "matmul batched": (lambda dt: t(2, 2, 3, dtype=dt) @ t(2, 3, 2, dtype=dt), "baddbmm_cuda"),
    "mv": (lambda dt: torch.mv(t(2, 3, dtype=dt), t(3, dtype=dt)), "addmv_impl_cuda"),
    "dot": (lambda dt: torch.dot(t(3, dtype=dt), t(3, dtype=dt)), "dot"),
    "addbmm": (
        lambda dt: torch.addbmm(t(2, 2, dtype=dt), t(2, 2, 3, dtype=dt), t(2, 3, 2, dtype=dt)),
        "addmm_cuda",
    ),
}
NAMES = {torch.int64: "Long", torch.int32: "Int", torch.uint8: "Byte", torch.bool: "Bool"}


@pytest.mark.parametrize("dtype", list(NAMES))
@pytest.mark.parametrize("name", list(PRODUCTS))
def test_an_integer_matrix_product_raises_cudas_error_at_the_call(name, dtype):
    fn, cuda_name = PRODUCTS[name]
    message = f"\"{cuda_name}\" not implemented for '{NAMES[dtype]}'"
    with pytest.raises(NotImplementedError, match=message):
        fn(dtype)
    torch.vdev.synchronize()  # nothing was queued


def test_products_with_nothing_to_multiply_return_as_on_cuda():
    # CUDA returns before dispatching on the dtype: an empty result, an inner dimension of 0.
    assert torch.mm(t(2, 0), t(0, 3)).cpu().eq(0).all()
    assert torch.mm(t(0, 3), t(3, 2)).shape == (0, 2)
    assert torch.mm(t(2, 3, dtype=torch.float64), t(3, 2, dtype=torch.float64)).sum().item() == 12


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda x: torch.histogram(x), "aten::histogram.bin_ct"),
        (
            lambda x: torch.histogram(x, torch.linspace(0, 1, 5, device=D)),
            "aten::histogram.bins_tensor",
        ),
        (lambda x: torch.histogramdd(x.view(-1, 2), bins=3), "aten::_histogramdd_bin_edges"),
    ],
    ids=["histogram bins", "histogram edges", "histogramdd"],
)
def test_histogram_raises_the_dispatchers_error_as_on_cuda(call, name):
    x = torch.rand(10, device=D)
    with pytest.raises(
        NotImplementedError, match=f"Could not run '{name}' with arguments from the 'vdev' backend"
    ):
        call(x)
    assert torch.histc(x, bins=4).sum().item() == 10  # histc has a CUDA kernel
