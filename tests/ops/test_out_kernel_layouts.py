"""A plan's out= kernel writes the device outputs only where they have the layout CPU's own kernel
gives them (cpp/backend/executor/out_kernel_layouts.h): an out= kernel may trust that layout and
write it whatever its out tensor's strides, which gave silently wrong values where vdev lays an
output out otherwise (its meta kernel's layout, or CUDA's). Where layouts may differ, a trial of
CPU's kernel on stand-ins that keep the arguments' layouts decides; where they differ or no trial
can tell, the plan runs the functional kernel and copies. `_testing` counts trials and refusals;
each test uses sizes of its own, so that its calls make new plans."""

import itertools

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import torch_vdev._testing as rt

DEV = "vdev"
A = torch.ops.aten

_lib = torch.library.Library("vdevtest_out_layouts", "DEF")
_lib.define("doubled(Tensor x) -> Tensor")
_lib.define("doubled.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")


def _doubled(x):
    return (x * 2).contiguous()


def _doubled_out(x, *, out):
    # Writes row-major whatever the out tensor's strides, as a kernel that trusts its own layout.
    row_major = torch.empty(x.shape).stride()
    torch.as_strided(out, x.shape, row_major).copy_(_doubled(x))
    return out


_lib.impl("doubled", _doubled, "CPU")
_lib.impl("doubled.out", _doubled_out, "CPU")
_lib.impl("doubled", lambda x: torch.empty_like(x), "Meta")  # keeps a transposed layout
_lib.impl("doubled.out", lambda x, *, out: out, "Meta")


def counts():
    return rt.out_layout_trials(), rt.out_kernels_declined_for_layout()


def test_an_out_kernel_that_trusts_its_own_layout_never_writes_another_one():
    # Was a silent wrong answer: the meta kernel lays the output out like x (transposed), CPU's
    # out= kernel writes it row-major into those strides.
    x = torch.randn(7, 3).t()
    expected = torch.ops.vdevtest_out_layouts.doubled(x)
    for _ in range(2):  # the plan's first call and a later one
        got = torch.ops.vdevtest_out_layouts.doubled(x.to(DEV))
        assert got.stride() == (1, 3)  # the meta kernel's layout, as on any device
        torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


def test_a_contiguous_call_runs_no_trial():
    x = torch.randn(7, 4)
    before = counts()
    torch.testing.assert_close(torch.ops.vdevtest_out_layouts.doubled(x.to(DEV)).cpu(), x * 2)
    torch.testing.assert_close(A.threshold_backward(x.to(DEV), x.to(DEV), 0.5).cpu(),
                               A.threshold_backward(x, x, 0.5))  # fmt: skip
    assert counts() == before


def test_a_tensor_iterator_kernel_keeps_its_out_kernel_without_a_trial():
    # threshold_backward with a transposed input: TensorIterator writes any out tensor's strides,
    # so the plan needs no trial; its layout is CPU's (and CUDA's).
    g, x = torch.randn(5, 9), torch.randn(9, 5).t()
    before = counts()
    got = A.threshold_backward(g.to(DEV), x.to(DEV), 0.1)
    expected = A.threshold_backward(g, x, 0.1)
    assert got.stride() == expected.stride() == (1, 5)
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
    assert counts() == before


def test_a_backward_operator_keeps_its_out_kernel_after_a_trial_of_the_real_sizes():
    # _softmax_backward_data of a transposed gradient: not TensorIterator, a backward operator
    # (no small stand-ins), laid out contiguously by CPU's kernel as by vdev's plan.
    g, y = torch.randn(11, 5).t(), torch.softmax(torch.randn(5, 11), 1)
    trials, declined = counts()
    got = A._softmax_backward_data(g.to(DEV), y.to(DEV), 1, torch.float32)
    expected = A._softmax_backward_data(g, y, 1, torch.float32)
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
    assert counts() == (trials + 1, declined)


def test_the_out_kernel_is_declined_where_the_plan_keeps_cudas_layout():
    # log_sigmoid of a transposed input: CUDA's (and vdev's) output is transposed, CPU's kernel
    # allocates a contiguous one. Its out= kernel happens to honour the strides, but a trial cannot
    # tell such a kernel from one that does not: the functional kernel and a copy put CPU's values
    # into CUDA's layout.
    x = torch.randn(9, 7).t()
    trials, declined = counts()
    got = F.logsigmoid(x.to(DEV))
    assert got.stride() == (1, 7)
    torch.testing.assert_close(got.cpu(), F.logsigmoid(x), rtol=0, atol=0)
    assert counts() == (trials + 1, declined + 1)


def test_channels_last_pooling_keeps_its_out_kernel_after_a_trial_of_small_stand_ins():
    x = torch.randn(2, 3, 10, 7).contiguous(memory_format=torch.channels_last)
    trials, declined = counts()
    got = F.avg_pool2d(x.to(DEV), 2)
    expected = F.avg_pool2d(x, 2)
    assert got.stride() == expected.stride()
    assert got.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(got.cpu(), expected)
    assert counts() == (trials + 1, declined)


@st.composite
def layouts(draw):
    """Sizes of 1 to 4 dimensions, an order of strides and which dimensions are broadcast."""
    dims = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 4), min_size=dims, max_size=dims))
    order = draw(st.permutations(range(dims)))
    broadcast = draw(st.lists(st.booleans(), min_size=dims, max_size=dims))
    return sizes, order, broadcast


def laid_out(base, sizes, order, broadcast):
    """`base` (of `sizes`) seen with its dimensions stored in `order` and `broadcast` ones
    expanded from their first element."""
    x = base.permute(order).contiguous().permute([order.index(d) for d in range(len(order))])
    x = x[tuple(slice(0, 1) if b else slice(None) for b in broadcast)]
    return x.expand(sizes)


_fresh_size = itertools.count(13)  # a leading size no other call has: a new plan per example


@given(case=layouts(), dim=st.integers(0, 3))
def test_softmax_of_any_layout_gets_cpus_values_and_strides_after_a_trial(case, dim):
    # softmax's kernel is not TensorIterator's: a trial decides. Its stand-ins keep the order of
    # the argument's strides and its broadcast dimensions, so the trial's output is laid out as
    # CPU lays out the real one, as vdev's plan does: the out= kernel is kept.
    sizes, order, broadcast = case
    n = next(_fresh_size)
    dim = dim % (len(sizes) + 1)
    x = torch.randn([n, *sizes])
    full = [n, *sizes], [0, *(d + 1 for d in order)], [False, *broadcast]
    a, av = laid_out(x, *full), laid_out(x.to(DEV), *full)
    assert av.stride() == a.stride()
    trials, declined = counts()
    got, expected = torch.softmax(av, dim), torch.softmax(a, dim)
    assert got.stride() == expected.stride()
    # float32's default tolerance: the reduction's order follows the worker's thread count.
    torch.testing.assert_close(got.cpu(), expected)
    assert counts()[1] == declined
    assert counts()[0] == trials + (0 if a.is_contiguous() else 1)
