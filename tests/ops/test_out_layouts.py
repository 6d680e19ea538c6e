"""Outputs keep the device tensor's layout whatever CPU's out= kernel does to its out tensor: some
(reflection and replication pads, their backwards) restride it to the input's memory format and
write that layout into the bytes; vdev then puts the values into the device layout and uses the
functional form for that plan from then on (cpp/backend/executor/operator_task.cpp). The sweeps
run PyTorch's operator database with channels-last and noncontiguous inputs against CPU, so no
other operator does it unnoticed."""

import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from sweeps import expected_failures_by_check, run_sweep

DEV = "vdev"
HERE = Path(__file__).resolve().parent
FULL = os.environ.get("VDEV_OPINFO_FULL") == "1"

PADS = {
    "reflect 2d": ((1, 2, 2, 1), "reflect", 4),
    "replicate 2d": ((1, 2, 2, 1), "replicate", 4),
    "reflect 3d": ((1, 1, 2, 0, 1, 2), "reflect", 5),
    "replicate 3d": ((1, 1, 2, 0, 1, 2), "replicate", 5),
    "circular 2d": ((1, 2, 2, 1), "circular", 4),
}


def channels_last(t):
    fmt = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
    return t.contiguous(memory_format=fmt)


@pytest.mark.parametrize("name", list(PADS))
def test_padding_a_channels_last_input_matches_cpu_forward_and_backward(name):
    pad, mode, dims = PADS[name]
    torch.manual_seed(0)
    x = channels_last(torch.randn((2, 3, 5, 6, 4)[:dims]))
    for _ in range(2):  # the second call uses the plan the first one corrected
        xc = x.clone().requires_grad_()
        xv = x.to(DEV).requires_grad_()
        fmt = torch.channels_last if dims == 4 else torch.channels_last_3d
        assert xv.is_contiguous(memory_format=fmt)
        yc, yv = F.pad(xc, pad, mode=mode), F.pad(xv, pad, mode=mode)
        torch.testing.assert_close(yv.cpu(), yc, rtol=0, atol=0)
        g = channels_last(torch.randn(yc.shape))
        yc.backward(g)
        yv.backward(g.to(DEV))
        torch.testing.assert_close(xv.grad.cpu(), xc.grad, rtol=0, atol=0)


def test_an_out_tensor_keeps_its_layout_and_gets_cpus_values():
    x = channels_last(torch.randn(2, 3, 4, 5))
    out = torch.empty(2, 3, 6, 7, device=DEV)  # contiguous
    torch._C._nn.reflection_pad2d(x.to(DEV), (1, 1, 1, 1), out=out)
    assert out.is_contiguous()  # CUDA's kernel keeps it; CPU's restrides its own out tensor
    torch.testing.assert_close(out.cpu(), torch._C._nn.reflection_pad2d(x, (1, 1, 1, 1)))


@pytest.mark.parametrize("layout", ["channels_last", "noncontiguous"])
def test_operators_match_cpu_with_inputs_of_other_layouts(layout):
    samples = "1000000" if FULL else "2"
    rows = run_sweep(HERE / "opinfo_sweep.py", "float32", samples, layout, min_rows=101)
    status = {row["op"]: row for row in rows}
    listed = expected_failures_by_check(HERE / "opinfo_expected_failures.txt", "float32")
    expected = {op: reason for (check, op), reason in listed.items() if check == "forward"}
    failing = {op for op, row in status.items() if row["status"] == "fail"}
    unexpected = {op: status[op]["msg"] for op in failing - expected.keys()}
    assert not unexpected, "unexpected failures:\n" + "\n".join(
        f"  {op}: {msg}" for op, msg in sorted(unexpected.items())
    )


A = torch.ops.aten
# Operators whose output layout comes from their arguments' strides, with one argument transposed:
# (grad, x, target) -> output. Among them those whose meta kernels (PyTorch's Python
# decompositions) lay a fresh output out otherwise than CPU's and CUDA's kernels
# (cpp/backend/executor/launch_plan.cpp: kIteratorOperators, kAllocatedLike) and pointwise ones
# of mixed dtypes (where: a bool condition).
FRESH_LAYOUTS = {
    "threshold_backward": lambda g, x, t: A.threshold_backward(g, x, 0.5),
    "elu_backward": lambda g, x, t: A.elu_backward(g, 1.0, 1.0, 1.0, False, x),
    "elu_backward_result": lambda g, x, t: A.elu_backward(g, 1.0, 1.0, 1.0, True, x),
    "hardsigmoid_backward": lambda g, x, t: A.hardsigmoid_backward(g, x),
    "hardswish_backward": lambda g, x, t: A.hardswish_backward(g, x),
    "hardtanh_backward": lambda g, x, t: A.hardtanh_backward(g, x, 0.2, 0.7),
    "softplus_backward": lambda g, x, t: A.softplus_backward(g, x, 1.0, 20.0),
    "gelu_backward": lambda g, x, t: A.gelu_backward(g, x, approximate="tanh"),
    "silu_backward": lambda g, x, t: A.silu_backward(g, x),
    "mish_backward": lambda g, x, t: A.mish_backward(g, x),
    "leaky_relu_backward": lambda g, x, t: A.leaky_relu_backward(g, x, 0.1, False),
    "sigmoid_backward": lambda g, x, t: A.sigmoid_backward(g, x),
    "tanh_backward": lambda g, x, t: A.tanh_backward(g, x),
    "logit_backward": lambda g, x, t: A.logit_backward(g, x, 0.01),
    "softshrink_backward": lambda g, x, t: A.softshrink_backward(g, x, 0.5),
    "hardshrink_backward": lambda g, x, t: A.hardshrink_backward(g, x, 0.5),
    "_softmax_backward_data": lambda g, x, t: A._softmax_backward_data(g, x, 1, torch.float32),
    "_log_softmax_backward_data": lambda g, x, t: A._log_softmax_backward_data(
        g, x, 1, torch.float32
    ),
    "mse_loss_backward": lambda g, x, t: A.mse_loss_backward(g, x, t, 0),
    "smooth_l1_loss_backward": lambda g, x, t: A.smooth_l1_loss_backward(g, x, t, 0, 1.0),
    "huber_loss_backward": lambda g, x, t: A.huber_loss_backward(g, x, t, 0, 1.0),
    "soft_margin_loss_backward": lambda g, x, t: A.soft_margin_loss_backward(g, x, t, 0),
    "binary_cross_entropy": lambda g, x, t: F.binary_cross_entropy(x, t, reduction="none"),
    "binary_cross_entropy_backward": lambda g, x, t: A.binary_cross_entropy_backward(
        g, x, t, None, 0
    ),
    "binary_cross_entropy_with_logits": lambda g, x, t: F.binary_cross_entropy_with_logits(
        x, t, reduction="none"
    ),
    "where": lambda g, x, t: torch.where(x > 0.5, g, t),
    "lerp": lambda g, x, t: torch.lerp(g, x, t),
    "addcdiv": lambda g, x, t: torch.addcdiv(t, g, x),
}


@pytest.mark.parametrize("transposed", ["x", "grad"])
@pytest.mark.parametrize("name", list(FRESH_LAYOUTS))
def test_a_fresh_output_takes_the_layout_cpus_kernel_gives_it(name, transposed):
    torch.manual_seed(0)
    x, g, t = torch.rand(4, 6) * 0.8 + 0.1, torch.randn(4, 6), torch.rand(4, 6)
    if transposed == "x":
        x = x.t().contiguous().t()  # the same values, strides (1, 4)
    else:
        g = g.t().contiguous().t()
    op = FRESH_LAYOUTS[name]
    expected = op(g, x, t)
    for _ in range(2):  # the plan's first call and a later one
        got = op(g.to(DEV), x.to(DEV), t.to(DEV))
        assert got.stride() == expected.stride()
        # CPU's vectorised and scalar loops may differ by a rounding (mish_backward), which
        # depends on where a row starts: float32's default tolerance.
        torch.testing.assert_close(got.cpu(), expected)


def test_log_softmax_of_a_transposed_gradient_gets_cpus_gradient():
    # Was a silent wrong answer: _log_softmax_backward_data.out writes contiguously whatever its
    # out tensor's strides, and the plan laid the output out as the meta kernel said (like the
    # gradient).
    torch.manual_seed(0)
    x, g = torch.randn(4, 6), torch.randn(6, 4).t()
    xc = x.clone().requires_grad_()
    torch.log_softmax(xc, 1).backward(g)
    xv = x.to(DEV).requires_grad_()
    torch.log_softmax(xv, 1).backward(g.to(DEV))
    torch.testing.assert_close(xv.grad.cpu(), xc.grad, rtol=0, atol=0)


def test_dropout_backward_lays_its_gradient_out_as_cuda_does():
    # CUDA's kernel allocates empty_like(grad, grad.suggest_memory_format()) (cuda/Dropout.cu):
    # contiguous for a transposed gradient, channels-last for a channels-last one; CPU's
    # grad * mask * scale would keep the transposed layout. The values are CPU's.
    torch.manual_seed(0)
    cases = (
        (torch.randn(6, 4).t(), torch.contiguous_format),
        (channels_last(torch.randn(2, 3, 4, 5)), torch.channels_last),
    )
    for g, fmt in cases:
        mask = torch.rand(g.shape) > 0.5
        got = A.native_dropout_backward(g.to(DEV), mask.to(DEV), 2.0)
        assert got.is_contiguous(memory_format=fmt)
        torch.testing.assert_close(got.cpu(), A.native_dropout_backward(g, mask, 2.0))


def test_an_empty_out_of_a_generated_out_overload_is_resized_contiguously_as_on_cpu():
    # hardswish_backward.out has no CPU kernel of its own: ATen's generated wrapper runs the
    # functional kernel, resizes the empty out contiguously and copies; abs.out's own kernel
    # restrides it to TensorIterator's layout.
    x, g = torch.rand(6, 4).t(), torch.randn(4, 6)
    for op in (
        lambda g, x, o: A.hardswish_backward.out(g, x, out=o),
        lambda g, x, o: torch.abs(x, out=o),
    ):
        expected, got = torch.empty(0), torch.empty(0, device=DEV)
        op(g, x, expected)
        op(g.to(DEV), x.to(DEV), got)
        assert got.stride() == expected.stride()
        torch.testing.assert_close(got.cpu(), expected)
