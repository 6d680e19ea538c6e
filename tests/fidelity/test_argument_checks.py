"""Argument checks at the call: what CPU's kernels reject without looking at the data, vdev rejects
when the operator is called, with CPU's Python type and message, as CUDA raises on the host before
launching; only failures that depend on the data in device memory come later
(tests/streams/test_task_errors.py). How: cpp/backend/checks/stand_in_check.h."""

import pytest
import torch
import torch.nn.functional as F
from asyncutil import gated, run_bounded, wait_until_blocked

from child_process import run_python

DEV = "vdev"


def ones(*shape, dtype=torch.float32, device=DEV):
    return torch.ones(*shape, dtype=dtype, device=device)


# Each rejected by CPU's kernel, not by the meta kernel that sizes the outputs.
REJECTED = {
    "relu of bool": lambda d: torch.relu(ones(4, dtype=torch.bool, device=d)),
    "conv2d float input, double weight": lambda d: F.conv2d(
        ones(1, 1, 4, 4, device=d), ones(1, 1, 2, 2, dtype=torch.float64, device=d)
    ),
    "conv_transpose2d float input, double weight": lambda d: F.conv_transpose2d(
        ones(1, 2, 3, 3, device=d),
        ones(2, 1, 3, 3, dtype=torch.float64, device=d),
        stride=2,
        padding=1,
    ),
    "histc of int64": lambda d: torch.histc(ones(4, dtype=torch.int64, device=d)),
    "uint16 + 1": lambda d: ones(4, dtype=torch.uint16, device=d) + 1,
    "complex of float and double": lambda d: torch.complex(
        ones(3, device=d), ones(3, dtype=torch.float64, device=d)
    ),
    "bucketize with 2-d boundaries": lambda d: torch.bucketize(
        ones(3, device=d), ones(2, 2, device=d)
    ),
    "masked_scatter with a uint8 mask": lambda d: ones(3, device=d).masked_scatter(
        ones(3, dtype=torch.uint8, device=d), ones(3, device=d)
    ),
    "mm of half and float": lambda d: torch.mm(
        ones(3, 3, dtype=torch.half, device=d), ones(3, 3, device=d)
    ),
    "cumsum into a bool out=": lambda d: torch.cumsum(
        ones(3, device=d), 0, out=torch.empty(3, dtype=torch.bool, device=d)
    ),
    "gcd of floats": lambda d: torch.gcd(ones(3, device=d), ones(3, device=d)),
    "sort of complex": lambda d: torch.sort(ones(3, dtype=torch.complex64, device=d)),
    # (addmm of bool raises CUDA's own error: tests/fidelity/test_missing_cuda_kernels.py)
    "addmm of float and double": lambda d: torch.addmm(
        ones(2, 2, device=d), ones(2, 2, device=d), ones(2, 2, dtype=torch.float64, device=d)
    ),
    # Operators with kernels of their own (ops/factories.cpp, ops/dropout.cpp).
    "full of 300 as uint8": lambda d: torch.full((3,), 300, dtype=torch.uint8, device=d),
    "fill_ of a complex into float": lambda d: ones(3, device=d).fill_(1 + 2j),
    "dropout of int64": lambda d: F.dropout(ones(3, dtype=torch.int64, device=d), 0.5),
    # Size-1 stand-ins fail these for their sizes; the real sizes round finds the dtype error.
    "avg_pool2d of bool (full-size round)": lambda d: F.avg_pool2d(
        ones(1, 1, 8, 8, dtype=torch.bool, device=d), 3
    ),
    "group_norm of int64 (full-size round)": lambda d: F.group_norm(
        ones(2, 4, 3, dtype=torch.int64, device=d), 2
    ),
    "topk of bool (full-size round)": lambda d: torch.topk(ones(8, dtype=torch.bool, device=d), 3),
    "layer_norm of int64 (full-size round)": lambda d: F.layer_norm(
        ones(2, 8, dtype=torch.int64, device=d), [8]
    ),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_a_rejected_call_raises_at_the_call_with_cpus_type_and_message(name):
    make = REJECTED[name]
    with pytest.raises(Exception) as on_cpu:
        make("cpu")
    kept = torch.arange(6.0, device=DEV) * 2  # queued before: must survive the error
    with pytest.raises(type(on_cpu.value)) as on_vdev:
        make(DEV)
    assert str(on_vdev.value).split("\n")[0] == str(on_cpu.value).split("\n")[0]
    torch.vdev.synchronize()  # nothing was queued to fail later
    assert kept.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def test_the_same_rejected_call_raises_every_time():
    for _ in range(3):
        with pytest.raises(NotImplementedError, match="UInt16"):
            ones(5, dtype=torch.uint16) + 1
    torch.vdev.synchronize()


# Stand-ins hold 0 in integer tensors: a floor division by them fails on CPU, where the real
# divisors do not. The first call settles it on the real data, on the host; the next is queued.
def test_a_check_only_the_stand_ins_fail_is_settled_and_later_calls_are_queued():
    a_cpu, b_cpu = torch.tensor([7, -9, 12, 5]), torch.tensor([2, 4, 5, 3])
    expected = torch.div(a_cpu, b_cpu, rounding_mode="floor")
    a, b = a_cpu.to(DEV), b_cpu.to(DEV)
    assert torch.equal(torch.div(a, b, rounding_mode="floor").cpu(), expected)  # settled
    results = []
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        # Queued, so it returns behind the closed gate; a host run would wait for the gate.
        assert run_bounded(lambda: results.append(torch.div(a, b, rounding_mode="floor")))
    assert torch.equal(results[0].cpu(), expected)


def test_a_real_division_by_zero_raises_at_the_call_like_cpu():
    a, zero = torch.tensor([7, 9]), torch.tensor([2, 0])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(a, zero, rounding_mode="floor")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(a.to(DEV), zero.to(DEV), rounding_mode="floor")
    torch.vdev.synchronize()


def test_in_sync_debug_error_mode_a_rejected_call_is_queued_and_raises_at_the_synchronize():
    # Settling on the real data would be a host wait that CUDA does not make: in the debug modes
    # the call is queued as before, and the error comes at the next synchronize.
    x = ones(3, dtype=torch.uint16)
    torch.vdev.set_sync_debug_mode("error")
    try:
        y = x + 1  # no "called a synchronizing vdev operation" error
    finally:
        torch.vdev.set_sync_debug_mode("default")
    with pytest.raises(NotImplementedError, match="UInt16"):
        torch.vdev.synchronize()
    del y


def test_checking_a_random_operator_draws_nothing_from_cpus_or_vdevs_generators():
    torch.manual_seed(7)
    torch.vdev.manual_seed(7)
    cpu_before = torch.rand(4)
    probabilities = torch.rand(5, 6, device=DEV)  # a shape no other test samples from
    state = torch.vdev.get_rng_state()
    first = torch.multinomial(probabilities, 3)  # a new plan: checked on stand-ins
    torch.vdev.set_rng_state(state)
    again = torch.multinomial(probabilities, 3)  # the cached plan: not checked again
    assert torch.equal(first.cpu(), again.cpu())
    torch.manual_seed(7)
    assert torch.equal(torch.rand(4), cpu_before)


def test_an_operator_outside_aten_is_not_run_on_stand_ins():
    calls = []
    lib = torch.library.Library("vdev_argcheck", "DEF")
    lib.define("count(Tensor x) -> Tensor")
    lib.impl("count", lambda x: calls.append(1) or x * 2, "CPU")
    lib.impl("count", lambda x: torch.empty_like(x), "Meta")
    try:
        y = torch.ops.vdev_argcheck.count(ones(3))
        assert y.cpu().tolist() == [2.0, 2.0, 2.0]
        assert len(calls) == 1  # its kernel may have side effects: run once, on the real data
    finally:
        lib._destroy()


def test_a_kernel_trusting_kernel_size_is_never_given_size_1_stand_ins():
    # CPU's slow_conv_transpose2d runs gemm over kernel_size without checking it against the
    # weight: a size-1 weight stand-in made the check read out of bounds (a crash at the call).
    k = 64
    x, w = ones(1, 1, 1, 1), ones(1, 1, k, k)
    args = ([k, k], None, [1, 1], [0, 0], [0, 0], [1, 1])
    got = torch.ops.aten.slow_conv_transpose2d(x, w, *args)
    assert torch.equal(got.cpu(), torch.ops.aten.slow_conv_transpose2d(x.cpu(), w.cpu(), *args))


def test_fill_checks_values_as_cpus_kernel_for_many_elements_does():
    # CPU's one-element fill converts values differently for reduced floating types.
    assert torch.full((3,), 2**40, dtype=torch.complex32, device=DEV).cpu().isinf().all()
    with pytest.raises(RuntimeError, match="c10::Half without overflow"):
        torch.full((3,), 70000, dtype=torch.float16, device=DEV)


def test_host_autocast_for_cpu_does_not_recast_a_checked_or_settled_call():
    x = ones(1, 1, 8, 8, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        dtypes = [F.pad(x, (2, 2, 2, 2), mode="reflect").dtype for _ in range(2)]
    assert dtypes == [torch.bfloat16, torch.bfloat16]


def test_assert_async_stays_queued():
    flag = torch.tensor(True, device=DEV)
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        assert run_bounded(lambda: torch._assert_async(flag, "a new message"))
    torch.vdev.synchronize()


def test_cpu_index_values_never_meet_shrunken_stand_ins():
    # Stand-ins of the first round are small; a CPU integer tensor keeps its real values, which an
    # unchecked kernel (segment_reduce with unsafe=True, _unsafe_index) would read far out of
    # bounds with: such calls skip that round (before: a segmentation fault at the call).
    r = run_python(
        """
        import torch
        n = 1 << 20
        lengths = torch.tensor([n // 2, n // 2])
        x = torch.ones(n)
        got = torch.segment_reduce(x.to("vdev"), "sum", lengths=lengths, unsafe=True)
        print(got.cpu().tolist() == torch.segment_reduce(x, "sum", lengths=lengths).tolist())
        idx = torch.tensor([n - 1, 0])
        print(torch.ops.aten._unsafe_index(x.to("vdev"), [idx]).cpu().tolist())
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[:2] == ["True", "[1.0, 1.0]"]
