"""The init tool judges an operator by what its kernels read (issue 50): a correct program that
GPUs run (torch.mv, beta=0 products, cummax, write-only out= arguments of operators vdev runs on
the host, fused SGD's first step) reports nothing, and the same calls still report an argument
they really read when no operation wrote it."""

import pytest
import torch
import torch.nn.functional as F
from torch.vdev.sanitizer import UninitializedReadError

DEV = "vdev"


@pytest.fixture(autouse=True)
def init_tool():
    before = torch.vdev.sanitizer.enabled()
    torch.vdev.sanitizer.disable()
    torch.vdev.sanitizer.enable("init")
    yield
    torch.vdev.sanitizer.disable()
    if before - {"warn"}:
        torch.vdev.sanitizer.enable(before - {"warn"}, warn="warn" in before)
    torch.vdev.sanitizer.clear_findings()


def clean(fn):
    out = fn()
    torch.vdev.synchronize()
    assert torch.vdev.sanitizer.finding_count() == 0
    return out


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, device=DEV)


def empty(*shape, dtype=torch.float32):
    return torch.empty(*shape, dtype=dtype, device=DEV)


# mv and a batch times a vector: ATen calls addmv_ on a fresh torch.empty with beta=0.
@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: randn(4, 4) @ randn(4), id="matrix@vector"),
        pytest.param(lambda: torch.mv(randn(3, 5), randn(5)), id="mv"),
        pytest.param(lambda: randn(2, 6, 6) @ randn(6), id="batch@vector"),
        pytest.param(
            lambda: torch.addmm(empty(3, 4), randn(3, 5), randn(5, 4), beta=0), id="addmm"
        ),
        pytest.param(lambda: torch.addmv(empty(3), randn(3, 5), randn(5), beta=0), id="addmv"),
        pytest.param(
            lambda: torch.baddbmm(empty(2, 3, 4), randn(2, 3, 5), randn(2, 5, 4), beta=0),
            id="baddbmm",
        ),
        pytest.param(
            lambda: torch.addbmm(empty(3, 4), randn(2, 3, 5), randn(2, 5, 4), beta=0), id="addbmm"
        ),
        pytest.param(lambda: torch.addr(empty(3, 4), randn(3), randn(4), beta=0), id="addr"),
        pytest.param(lambda: empty(3, 4).addmm_(randn(3, 5), randn(5, 4), beta=0), id="addmm_"),
        pytest.param(
            lambda: torch.addmm(
                empty(3, 4, dtype=torch.cfloat),
                randn(3, 5, dtype=torch.cfloat),
                randn(5, 4, dtype=torch.cfloat),
                beta=0j,
            ),
            id="addmm-complex-beta",
        ),
    ],
)
def test_a_product_with_beta_zero_does_not_read_self(call):
    out = clean(call)
    assert torch.isfinite(out).all()  # and the product is usable afterwards
    assert torch.vdev.sanitizer.finding_count() == 0


@pytest.mark.parametrize("beta", [1, 0.5])
def test_a_product_with_beta_not_zero_still_reads_self(beta):
    with pytest.raises(UninitializedReadError, match="aten::addmm"):
        torch.addmm(empty(3, 4), randn(3, 5), randn(5, 4), beta=beta)
    with pytest.raises(UninitializedReadError, match="aten::addmv_"):
        empty(3).addmv_(randn(3, 5), randn(5), beta=beta)


@pytest.mark.parametrize("training", [True, False])
def test_rrelu_writes_its_noise_without_reading_it(training):
    x = randn(64)
    y = clean(lambda: F.rrelu(x, training=training))
    assert y.shape == x.shape


def test_rrelu_of_an_unwritten_input_is_still_reported():
    with pytest.raises(UninitializedReadError, match="rrelu_with_noise"):
        F.rrelu(empty(8), training=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32])
@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
def test_cummax_and_cummin_write_their_values_and_indices(fn, dtype):
    x = torch.arange(7, device=DEV).to(dtype)
    values, indices = clean(lambda: fn(x, 0))
    expected = fn(x.cpu(), 0)
    assert torch.equal(values.cpu(), expected.values)
    assert torch.equal(indices.cpu(), expected.indices)


def test_cummax_of_an_unwritten_input_is_still_reported():
    with pytest.raises(UninitializedReadError):
        torch.cummax(empty(5), 0)


# Operators vdev runs on the host, each given a fresh torch.empty as out=: at::native::cpu_fallback
# copies out= arguments to the host before the call; that copy is not a read of the program's.
def _eig_out():
    m = randn(4, 4)
    out = (empty(4, dtype=torch.cfloat), empty(4, 4, dtype=torch.cfloat))
    return torch.linalg.eig(m, out=out)


def _symmetric():
    m = randn(4, 4)
    return m @ m.T + 4 * torch.eye(4, device=DEV)


HOST_RUN_OUTS = {
    "masked_select": lambda: torch.masked_select(
        torch.arange(6.0, device=DEV), torch.arange(6, device=DEV) > 2, out=empty(3)
    ),
    "logcumsumexp": lambda: torch.logcumsumexp(randn(5), 0, out=empty(5)),
    "geqrf": lambda: torch.geqrf(randn(4, 4), out=(empty(4, 4), empty(4))),
    "linalg.eig": _eig_out,
    "linalg.eigvals": lambda: torch.linalg.eigvals(randn(4, 4), out=empty(4, dtype=torch.cfloat)),
    "linalg.eigh": lambda: torch.linalg.eigh(_symmetric(), out=(empty(4), empty(4, 4))),
    "linalg.eigvalsh": lambda: torch.linalg.eigvalsh(_symmetric(), out=empty(4)),
    "linalg.svdvals": lambda: torch.linalg.svdvals(randn(4, 3), out=empty(3)),
    "linalg.lstsq": lambda: torch.linalg.lstsq(randn(4, 3), randn(4, 2)),
}


@pytest.mark.parametrize("name", sorted(HOST_RUN_OUTS))
def test_a_fresh_out_argument_of_a_host_run_is_only_written(name):
    clean(HOST_RUN_OUTS[name])


def test_a_host_run_still_reports_an_input_it_reads_unwritten():
    with pytest.raises(UninitializedReadError, match="logcumsumexp"):
        torch.logcumsumexp(empty(5), 0, out=empty(5))


def test_fused_sgd_with_momentum_first_step_writes_its_momentum_buffers():
    torch.manual_seed(0)
    params = [torch.nn.Parameter(randn(4, 3)), torch.nn.Parameter(randn(3))]
    reference = [torch.nn.Parameter(p.detach().cpu().clone()) for p in params]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, fused=True)
    ref_opt = torch.optim.SGD(reference, lr=0.1, momentum=0.9)
    for _ in range(3):
        grads = [torch.randn(p.shape) for p in reference]
        for p, r, g in zip(params, reference, grads, strict=True):
            p.grad, r.grad = g.to(DEV), g.clone()
        clean(opt.step)
        ref_opt.step()
    for p, r in zip(params, reference, strict=True):
        torch.testing.assert_close(p.detach().cpu(), r.detach())


def test_fused_sgd_after_the_first_step_reads_its_momentum_buffers():
    p = torch.nn.Parameter(randn(4))
    p.grad = randn(4)
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, fused=True)
    opt.step()
    torch.vdev.synchronize()
    # A buffer replaced by unwritten memory after the first step is read by the second.
    opt.state[p]["momentum_buffer"] = empty(4)
    with pytest.raises(UninitializedReadError, match="_fused_sgd_"):
        opt.step()


@pytest.mark.parametrize(
    ("shape", "pad"),
    [((1, 2, 5), (2, 1)), ((1, 1, 2, 3), (1, 2, 2, 1)), ((1, 1, 2, 3, 2), (1, 1, 2, 0, 1, 1))],
)
def test_circular_padding_reads_its_own_corners_before_writing_them_and_is_clean(shape, pad):
    # ATen pads one dimension after the other, copying corners a later step overwrites.
    x = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    y = clean(lambda: F.pad(x.to(DEV), pad, mode="circular"))
    assert torch.equal(y.cpu(), F.pad(x, pad, mode="circular"))


def test_circular_padding_of_an_unwritten_input_is_still_reported():
    with pytest.raises(UninitializedReadError):
        F.pad(empty(1, 1, 2, 3), (1, 2, 2, 1), mode="circular")


def test_fused_sgd_driven_by_a_grad_scaler_is_clean():
    # GradScaler hands fused SGD its found_inf: the first step's buffers count as written whatever
    # its value (a skipped first step is missed, docs/sanitizer.md), never as a false report.
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
    scaler = torch.amp.GradScaler(DEV)
    x = randn(8, 4)

    def steps():
        for _ in range(3):
            opt.zero_grad()
            scaler.scale(model(x).square().mean()).backward()
            scaler.step(opt)
            scaler.update()

    clean(steps)
    assert all(torch.isfinite(p).all() for p in model.parameters())
