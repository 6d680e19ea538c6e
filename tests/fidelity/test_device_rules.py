"""Device rules as CUDA's: a non-scalar CPU tensor with vdev tensors raises CUDA's error, CUDA's
exceptions stay allowed, outputs never land on the CPU because an argument did, and vdev:0 with
vdev:1 in one operator raises (cpp/backend/checks/device_rules.h says which PyTorch source decides
each rule)."""

import pytest
import torch
import torch.nn.functional as F

SAME_DEVICE = "Expected all tensors to be on the same device"


def v(*shape, dev="vdev"):
    return torch.arange(float(torch.Size(shape).numel()), device=dev).reshape(shape) / 7 + 1


def c(*shape):
    return v(*shape, dev="cpu")


def idx(*values):
    return torch.tensor(values)


# Calls CUDA rejects, one or more per operator family. The wrapper-checked ones (every operator
# without `device_check: NoCheck`) give torchgen's message, naming the argument.
REJECTED = {
    # elementwise (TensorIterator)
    "add non-scalar cpu": (lambda: v(3) + c(3), "found at least two devices, vdev:0 and cpu"),
    "mul_ cpu": (lambda: v(3).mul_(c(3)), "found at least two devices"),
    "add out=vdev from cpu": (lambda: torch.add(c(2), c(2), out=v(2)), "found at least two"),
    "where cpu condition": (lambda: torch.where(idx(True, False), v(2), v(2)), "two devices"),
    "masked_fill cpu mask": (lambda: v(3).masked_fill(idx(True, False, True), 0.0), "two devices"),
    "masked_fill 0-dim cpu mask": (lambda: v(3).masked_fill(torch.tensor(True), 0.0), "two"),
    # reductions
    "sum out=vdev from cpu": (lambda: torch.sum(c(2, 2), 0, out=v(2)), SAME_DEVICE),
    "equal": (lambda: torch.equal(v(2), c(2)), "got other is on cpu"),
    # matmul family
    "mm vdev @ cpu": (lambda: v(3, 3) @ c(3, 3), "got mat2 is on cpu, different from other"),
    "mm cpu @ vdev": (lambda: c(3, 3) @ v(3, 3), "got mat2 is on vdev:0, different from other"),
    "bmm": (lambda: torch.bmm(v(2, 3, 3), c(2, 3, 3)), "got mat2 is on cpu"),
    "addmm cpu bias": (lambda: torch.addmm(c(3), v(2, 3), v(3, 3)), SAME_DEVICE),
    "linear cpu weight": (lambda: F.linear(v(2, 3), c(4, 3)), SAME_DEVICE),
    # convolutions
    "conv2d cpu input": (lambda: F.conv2d(c(1, 1, 4, 4), v(1, 1, 2, 2)), "got weight is on vdev"),
    "conv2d cpu weight": (lambda: F.conv2d(v(1, 1, 4, 4), c(1, 1, 2, 2)), SAME_DEVICE),
    # indexing, scatter, gather
    "index_select cpu index": (lambda: v(3).index_select(0, idx(0)), "got index is on cpu"),
    "gather cpu index": (lambda: v(3).gather(0, idx(0)), "got index is on cpu"),
    "scatter cpu index": (lambda: v(3).scatter(0, idx(0), v(1)), "got index is on cpu"),
    "take cpu index": (lambda: v(3).take(idx(0)), "got index is on cpu"),
    "masked_select cpu input": (
        lambda: torch.masked_select(c(2), torch.tensor([True, False], device="vdev")),
        "got mask is on vdev:0",
    ),
    # cat and stack
    "cat": (lambda: torch.cat([v(2), c(2)]), "got tensors is on cpu"),
    "stack": (lambda: torch.stack([v(2), c(2)]), "got tensors is on cpu"),
    # embedding
    "embedding cpu indices": (lambda: F.embedding(idx(0, 1), v(3, 2)), "got index is on cpu"),
    # norms
    "layer_norm cpu weight": (lambda: F.layer_norm(v(2, 3), (3,), c(3), c(3)), "got weight"),
    "batch_norm cpu statistics": (lambda: F.batch_norm(v(2, 3), c(3), c(3)), "running_mean"),
    "group_norm cpu weight": (lambda: F.group_norm(v(2, 4), 2, c(4)), SAME_DEVICE),
    # losses
    "cross_entropy cpu target": (lambda: F.cross_entropy(v(2, 3), idx(0, 1)), "got target"),
    "nll_loss cpu target": (lambda: F.nll_loss(v(2, 3), idx(0, 1)), "got target is on cpu"),
    "mse_loss cpu target": (lambda: F.mse_loss(v(3), c(3)), SAME_DEVICE),
    # foreach
    "foreach add cpu list": (lambda: torch._foreach_add([v(2)], [c(2)]), SAME_DEVICE),
    # linalg
    "linalg.det cpu out": (lambda: torch.linalg.det(v(2, 2), out=c(0)), SAME_DEVICE),
    "linalg.solve cpu b": (
        lambda: torch.linalg.solve(v(2, 2) + torch.eye(2, device="vdev"), c(2)),
        "got B is on cpu",
    ),
    # structured operators (their functional forms no longer go through ATen's wrapper, which
    # allocated outputs before any device check)
    "index_add cpu source": (
        lambda: v(3).index_add(0, idx(0).to("vdev"), c(1)),
        "got source is on cpu",
    ),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_a_cpu_tensor_cuda_rejects_raises_cudas_error(name):
    call, message = REJECTED[name]
    with pytest.raises(RuntimeError, match=SAME_DEVICE) as err:
        call()
    assert message in str(err.value)
    torch.vdev.synchronize()  # nothing was queued that fails later


def test_a_rejected_call_changes_nothing_on_the_device():
    x = v(3)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        x.mul_(c(3))
    out = torch.zeros(2, device="vdev")
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.add(c(2), c(2), out=out)
    assert torch.equal(x.cpu(), c(3)) and torch.equal(out.cpu(), torch.zeros(2))


# What CUDA accepts: each result is on vdev and equals the same call on CPU tensors.
ACCEPTED = {
    "0-dim cpu tensor as a scalar": lambda d: v(3, dev=d) + torch.tensor(2.0),
    "python number": lambda d: v(3, dev=d) * 3,
    "0-dim cpu tensor first": lambda d: torch.tensor(2.0) - v(3, dev=d),
    "where 0-dim cpu condition": lambda d: torch.where(torch.tensor(True), v(2, dev=d), 0.0),
    "masked_fill 0-dim cpu value": lambda d: v(3, dev=d).masked_fill(
        torch.tensor([True, False, True], device=d), torch.tensor(-1.0)
    ),
    "lerp 0-dim cpu weight": lambda d: torch.lerp(v(3, dev=d), v(3, dev=d) * 2, torch.tensor(0.25)),
    "index with cpu indices": lambda d: v(4, 2, dev=d)[idx(3, 0, 1)],
    "index with a cpu mask": lambda d: v(4, dev=d)[idx(True, False, True, True)],
    "index_put_ with cpu indices": lambda d: v(4, dev=d).index_put_((idx(1, 3),), v(2, dev=d)),
    "setitem with cpu indices": lambda d: _setitem(v(4, dev=d), idx(0, 2), 9.0),
    "foreach mul by a cpu 0-dim tensor": lambda d: torch._foreach_mul(
        [v(2, dev=d)], torch.tensor(3.0)
    )[0],  # fmt: skip
    "bernoulli_ with cpu p (all ones)": lambda d: torch.zeros(3, device=d).bernoulli_(
        torch.ones(3)
    ),
}


def _setitem(x, index, value):
    x[index] = value
    return x


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_what_cuda_accepts_runs_on_the_device(name):
    got = ACCEPTED[name]("vdev")
    assert got.device.type == "vdev"
    assert torch.equal(got.cpu(), ACCEPTED[name]("cpu"))


def test_clip_grad_norm_over_parameters_on_two_devices_works_as_on_cuda():
    # torch.nn.utils groups by device and gathers the norms: mixed devices are legal.
    params = [torch.nn.Parameter(v(3)), torch.nn.Parameter(c(2))]
    ref = [torch.nn.Parameter(c(3)), torch.nn.Parameter(c(2))]
    for p in params + ref:
        p.grad = torch.ones_like(p) * 4
    total = torch.nn.utils.clip_grad_norm_(params, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(ref, 1.0)
    torch.testing.assert_close(total.cpu(), expected)
    torch.testing.assert_close(params[0].grad.cpu(), ref[0].grad)


TWO_DEVICES = {
    "add": lambda a, b: a + b,
    "cat": lambda a, b: torch.cat([a, b]),
    "mm": lambda a, b: a.reshape(2, 2) @ b.reshape(2, 2),
    "conv2d": lambda a, b: F.conv2d(a.reshape(1, 1, 2, 2), b.reshape(1, 1, 2, 2)),
    "index_select": lambda a, b: a.index_select(0, b.long()),
    "where": lambda a, b: torch.where(a > 0, a, b),
    "foreach_add": lambda a, b: torch._foreach_add([a], [b]),
}


@pytest.mark.parametrize("name", sorted(TWO_DEVICES))
def test_two_vdev_devices_in_one_operator_raise(name):
    a, b = torch.ones(4, device="vdev:0"), torch.ones(4, device="vdev:1")
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        TWO_DEVICES[name](a, b)


def test_a_convolution_backward_across_two_devices_raises():
    x = torch.ones(1, 1, 4, 4, device="vdev:0")
    w = torch.ones(1, 1, 2, 2, device="vdev:1")
    grad = torch.ones(1, 1, 3, 3, device="vdev:0")
    with pytest.raises(RuntimeError, match="got weight is on vdev:1"):
        torch.ops.aten.convolution_backward(
            grad, x, w, [1], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]
        )


def test_an_operator_redefined_with_more_arguments_gets_a_new_rule():
    def define(schema, impl):
        lib = torch.library.Library("vdev_rules_test", "DEF")
        lib.define(schema)
        lib.impl("f", impl, "CPU")  # vdev calls reach vdev's fallback, which runs it
        return lib

    lib = define("f(Tensor a, Tensor b) -> Tensor", lambda a, b: a + b)
    torch.ops.vdev_rules_test.f(v(2), v(2))
    lib._destroy()
    lib = define("f(Tensor a, Tensor b, Tensor c) -> Tensor", lambda a, b, c: a + b)
    try:
        with pytest.raises(RuntimeError, match="got c is on cpu"):
            torch.ops.vdev_rules_test.f(v(2), v(2), c(2))
    finally:
        lib._destroy()
