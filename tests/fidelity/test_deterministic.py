"""torch.use_deterministic_algorithms(True) with fill_uninitialized_memory fills new device memory
as CUDA does (empty, empty_strided and resize_ growth: NaN for floating types, the largest value
for integers)."""

import inspect
import re
import warnings

import pytest
import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.complex64]

NEW_MEMORY = {
    "empty": lambda d, dt: torch.empty(3, 2, device=d, dtype=dt),
    "empty_strided": lambda d, dt: torch.empty_strided((2, 3), (1, 2), device=d, dtype=dt),
    "empty_like": lambda d, dt: torch.empty_like(torch.zeros(4, device=d, dtype=dt)),
    "new_empty": lambda d, dt: torch.zeros(1, device=d, dtype=dt).new_empty(5),
    "resize_ growth": lambda d, dt: torch.zeros(2, device=d, dtype=dt).resize_(6),
}


@pytest.fixture
def deterministic():
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before)
    torch.utils.deterministic.fill_uninitialized_memory = True


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(NEW_MEMORY))
def test_new_memory_is_filled_as_on_cuda(deterministic, name, dtype):
    want = NEW_MEMORY[name]("cpu", dtype)
    got = NEW_MEMORY[name]("vdev", dtype)
    assert got.device.type == "vdev"
    bits = lambda t: t.contiguous().view(torch.uint8)  # noqa: E731
    assert torch.equal(bits(got.cpu()), bits(want))  # bit for bit (NaN included)


def test_nothing_is_filled_when_fill_uninitialized_memory_is_off(deterministic):
    torch.utils.deterministic.fill_uninitialized_memory = False
    x = torch.full((1024,), 7.0, device="vdev")
    del x  # its block returns to the cache and is handed out again unfilled
    y = torch.empty(1024, device="vdev")
    assert torch.equal(y.cpu(), torch.full((1024,), 7.0))


# ---- alerts: what CUDA has no deterministic kernel for raises at the call --------------------

D = "vdev"


def grad_of(fn, *shape):
    """Runs fn on a leaf of `shape` and back-propagates, where CUDA's alerts of backward kernels
    fire."""
    return lambda: fn(torch.randn(*shape, device=D, requires_grad=True)).sum().backward()


def index(*values):
    return torch.tensor(values, device=D)


F = torch.nn.functional

# (call, CUDA's caller string): decided by the alertNotDeterministic calls of ATen's CUDA kernels
# (backend/checks/nondeterministic_alerts.cpp names each file).
ALERTS = {
    "adaptive_avg_pool2d backward": (
        grad_of(lambda x: F.adaptive_avg_pool2d(x, 3), 1, 2, 5, 5),
        "adaptive_avg_pool2d_backward_cuda",
    ),
    "adaptive_avg_pool3d backward": (
        grad_of(lambda x: F.adaptive_avg_pool3d(x, 2), 1, 2, 3, 3, 3),
        "adaptive_avg_pool3d_backward_cuda",
    ),
    "adaptive_max_pool2d backward": (
        grad_of(lambda x: F.adaptive_max_pool2d(x, 2), 1, 2, 5, 5),
        "adaptive_max_pool2d_backward_cuda",
    ),
    "avg_pool3d backward": (
        grad_of(lambda x: F.avg_pool3d(x, 2), 1, 1, 4, 4, 4),
        "avg_pool3d_backward_cuda",
    ),
    "fractional_max_pool2d backward": (
        grad_of(lambda x: F.fractional_max_pool2d(x, 2, output_size=2), 1, 1, 5, 5),
        "fractional_max_pool2d_backward_cuda",
    ),
    "fractional_max_pool3d backward": (
        grad_of(lambda x: F.fractional_max_pool3d(x, 2, output_size=2), 1, 1, 5, 5, 5),
        "fractional_max_pool3d_backward_cuda",
    ),
    "max_unpool1d": (
        lambda: F.max_unpool1d(
            *F.max_pool1d(torch.randn(1, 1, 4, device=D), 2, return_indices=True), 2
        ),
        "max_unpooling2d_forward_out",
    ),
    "max_unpool2d": (
        lambda: F.max_unpool2d(
            *F.max_pool2d(torch.randn(1, 1, 4, 4, device=D), 2, return_indices=True), 2
        ),
        "max_unpooling2d_forward_out",
    ),
    "max_unpool3d": (
        lambda: F.max_unpool3d(
            *F.max_pool3d(torch.randn(1, 1, 4, 4, 4, device=D), 2, return_indices=True), 2
        ),
        "max_unpooling3d_forward_out",
    ),
    "interpolate linear backward": (
        grad_of(lambda x: F.interpolate(x, scale_factor=2, mode="linear"), 1, 1, 4),
        "upsample_linear1d_backward_out_cuda",
    ),
    # The operator itself: from torch 2.15 on, F.interpolate(mode="bicubic") of a non-CPU tensor
    # takes a deterministic decomposition in deterministic mode, on CUDA and vdev alike (below).
    "upsample_bicubic2d backward": (
        grad_of(lambda x: torch._C._nn.upsample_bicubic2d(x, None, False, [2.0, 2.0]), 1, 1, 4, 4),
        "upsample_bicubic2d_backward_out_cuda",
    ),
    "reflection pad 1d backward": (
        grad_of(lambda x: F.pad(x, (1, 1), mode="reflect"), 1, 1, 4),
        "reflection_pad1d_backward_out_cuda",
    ),
    "reflection pad 3d backward": (
        grad_of(lambda x: F.pad(x, (1, 1, 1, 1, 1, 1), mode="reflect"), 1, 1, 3, 3, 3),
        "reflection_pad3d_backward_out_cuda",
    ),
    "nll_loss 2d with a reduction": (
        lambda: F.nll_loss(
            torch.randn(2, 3, 4, 4, device=D), torch.zeros(2, 4, 4, dtype=torch.long, device=D)
        ),
        "nll_loss2d_forward_out_cuda_template",
    ),
    "ctc_loss backward": (
        grad_of(
            lambda x: F.ctc_loss(x.log_softmax(2), index([1, 2]), index(4), index(2)),
            4,
            1,
            3,
        ),
        "ctc_loss_backward_gpu",
    ),
    "embedding_bag max backward": (
        grad_of(lambda w: F.embedding_bag(index([1, 2]), w, mode="max"), 5, 3),
        "embedding_bag_backward_cuda_max",
    ),
    "put_": (lambda: torch.zeros(5, device=D).put_(index(1), torch.ones(1, device=D)), "put_"),
    "put_ accumulate": (
        lambda: torch.zeros(5, device=D).put_(index(1), torch.ones(1, device=D), accumulate=True),
        "put_",
    ),
    "take backward": (grad_of(lambda x: x.take(index(1, 1)), 4), "put_"),
    "histc of floats": (
        lambda: torch.histc(torch.randn(8, device=D)),
        "_histc_cuda with floating point input",
    ),
    "bincount with weights": (
        lambda: torch.bincount(index(1, 2), torch.ones(2, device=D)),
        "_bincount_cuda",
    ),
    "median with indices": (
        lambda: torch.randn(5, device=D).median(0),
        "median CUDA with indices output",
    ),
    "nanmedian with indices": (
        lambda: torch.randn(5, device=D).nanmedian(0),
        "median CUDA with indices output",
    ),
    "grid_sample 2d backward": (
        grad_of(
            lambda x: F.grid_sample(x, torch.rand(1, 2, 2, 2, device=D), align_corners=False),
            1,
            1,
            3,
            3,
        ),
        "grid_sampler_2d_backward_cuda",
    ),
    "grid_sample 3d backward": (
        grad_of(
            lambda x: F.grid_sample(x, torch.rand(1, 2, 2, 2, 3, device=D), align_corners=False),
            1,
            1,
            3,
            3,
            3,
        ),
        "grid_sampler_3d_backward_cuda",
    ),
    "index_reduce": (
        lambda: torch.ones(3, device=D).index_reduce_(
            0, index(0, 0), torch.ones(2, device=D), "prod"
        ),
        "index_reduce_cuda",
    ),
    "scatter reduce=multiply": (
        lambda: torch.ones(3, device=D).scatter_(
            0, index(0), torch.ones(1, device=D), reduce="multiply"
        ),
        "scatter_reduce_cuda_kernel",
    ),
    "scatter reduce=add of integers": (
        lambda: torch.ones(3, device=D, dtype=torch.long).scatter_(
            0, index(0), index(1), reduce="add"
        ),
        "scatter_reduce_cuda_kernel",
    ),
    "scatter_reduce prod": (
        lambda: torch.ones(3, device=D).scatter_reduce(
            0, index(0, 0), torch.ones(2, device=D), "prod"
        ),
        "scatter_reduce_cuda_prod_",
    ),
}

# Calls CUDA runs deterministically (a deterministic kernel, or a decomposition PyTorch's Python
# front end takes for CUDA tensors), so vdev must not alert either.
NO_ALERT = {
    # torch 2.13 made CUDA's kthvalue deterministic (PR #165762 removed its alert) and dropped
    # the CUBLAS_WORKSPACE_CONFIG check (Context.h has no alertCuBLASConfigNotDeterministic; the
    # use_deterministic_algorithms docstring lists neither).
    "kthvalue": lambda: torch.kthvalue(torch.randn(5, device=D), 2),
    "mm without CUBLAS_WORKSPACE_CONFIG": lambda: torch.mm(
        torch.randn(3, 3, device=D), torch.randn(3, 3, device=D)
    ),
    "adaptive_avg_pool2d to 1x1 backward": grad_of(
        lambda x: F.adaptive_avg_pool2d(x, 1), 1, 2, 5, 5
    ),
    "interpolate bilinear backward": grad_of(
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), 1, 1, 4, 4
    ),
    "replication pad backward": grad_of(
        lambda x: F.pad(x, (1, 1, 1, 1), mode="replicate"), 1, 1, 4, 4
    ),
    "reflection pad 2d backward": grad_of(
        lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), 1, 1, 4, 4
    ),
    "max_pool3d backward": grad_of(lambda x: F.max_pool3d(x, 2), 1, 1, 4, 4, 4),
    "nll_loss 2d without reduction": lambda: F.nll_loss(
        torch.randn(2, 3, 4, 4, device=D),
        torch.zeros(2, 4, 4, dtype=torch.long, device=D),
        reduction="none",
    ),
    "embedding_bag mean backward": grad_of(lambda w: F.embedding_bag(index([1, 2]), w), 5, 3),
    "bincount without weights": lambda: torch.bincount(index(1, 2)),
    "median of all": lambda: torch.randn(5, device=D).median(),
    "scatter reduce=add of floats": lambda: torch.ones(3, device=D).scatter_(
        0, index(0), torch.ones(1, device=D), reduce="add"
    ),
    "scatter_reduce sum": lambda: torch.ones(3, device=D).scatter_reduce(
        0, index(0, 0), torch.ones(2, device=D), "sum"
    ),
    "scatter_add and index_add": lambda: (
        torch.ones(3, device=D).scatter_add_(0, index(0, 0), torch.ones(2, device=D)),
        torch.ones(3, device=D).index_add_(0, index(0, 0), torch.ones(2, device=D)),
    ),
    "index_put accumulate": lambda: torch.zeros(3, device=D).index_put_(
        (index(0, 0),), torch.ones(2, device=D), True
    ),
}


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_what_cuda_cannot_do_deterministically_raises_at_the_call(deterministic, name):
    call, caller = ALERTS[name]
    # CUDA's message from the host, not a stream's error (those start with "[aten::").
    with pytest.raises(
        RuntimeError,
        match="^" + re.escape(caller) + " does not have a deterministic implementation",
    ):
        call()
    torch.vdev.synchronize()  # nothing failed on the stream


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_with_warn_only_it_warns_once_per_call_and_computes(name, capfd):
    call, caller = ALERTS[name]
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        # A first call plans the operators; PyTorch's Python meta functions of histc, median and
        # max_unpool repeat the alert then (they take a meta tensor for a CUDA one).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
            torch.vdev.synchronize()
        capfd.readouterr()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
            torch.vdev.synchronize()
    finally:
        torch.use_deterministic_algorithms(False)
    alerts = [
        w for w in caught if str(w.message).startswith(caller + " does not have a deterministic")
    ]
    assert len(alerts) == 1, [str(w.message) for w in caught]
    assert "warn_only=True" in str(alerts[0].message)
    # CPU's own kernels (put_, max_unpool) must not repeat it from the stream's worker either.
    assert "deterministic" not in capfd.readouterr().err


@pytest.mark.parametrize("name", sorted(NO_ALERT))
def test_what_cuda_does_deterministically_runs(deterministic, name):
    NO_ALERT[name]()
    torch.vdev.synchronize()


def test_without_deterministic_mode_nothing_alerts():
    for call, _ in ALERTS.values():
        call()
    torch.vdev.synchronize()


def test_interpolate_bicubic_takes_torchs_deterministic_path_where_torch_has_one(deterministic):
    # torch 2.15's F.interpolate decomposes bicubic upsampling of a non-CPU tensor in
    # deterministic mode (torch/nn/functional.py), so CUDA does not alert; before, its backward
    # kernel did, and so does vdev.
    decomposes = "upsample_bicubic2d_vec" in inspect.getsource(F.interpolate)
    x = torch.randn(1, 1, 4, 4, device=D, requires_grad=True)
    if decomposes:
        F.interpolate(x, scale_factor=2, mode="bicubic").sum().backward()
        torch.vdev.synchronize()
        assert x.grad.shape == x.shape
    else:
        with pytest.raises(RuntimeError, match="upsample_bicubic2d_backward_out_cuda"):
            F.interpolate(x, scale_factor=2, mode="bicubic").sum().backward()
