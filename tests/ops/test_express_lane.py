"""The express lane (cpp/backend/executor/express.h): the hottest operators reach the executor
unboxed. What it promises: every call it takes is queued, asynchronously, with CPU's result bit for
bit (the same launch plan and task as the boxed path); every call it declines (a CPU tensor, two
devices, a written argument that overlaps, all-empty inputs) takes the boxed path, which raises
CUDA's error or computes as before; nothing is left changed by a call that raises.
`_testing.express_calls()` tells which path a call took."""

import pytest
import torch
import torch.nn.functional as F
from asyncutil import gated, run_in_threads
from hypothesis import given
from hypothesis import strategies as st

from torch_vdev import _testing as rt

DEV = "vdev"


def taken(fn) -> tuple[object, int]:
    """fn()'s result and how many calls the lane queued for it."""
    before = rt.express_calls()
    out = fn()
    return out, rt.express_calls() - before


def inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, generator=g).to(dtype)
    y = torch.randn(5, generator=g).to(dtype)  # broadcast against x
    t = torch.randn(5, 4, generator=g).to(dtype).t()  # not contiguous
    return x, y, t


# (name, fn of (x, y, t) -> tensor, dtypes): one call of the lane's operator each.
FLOAT_OPS = [
    ("add", lambda x, y, t: x + y),
    ("add_alpha", lambda x, y, t: torch.add(x, t, alpha=2)),
    ("add_number", lambda x, y, t: x + 0.3),
    ("sub", lambda x, y, t: x - t),
    ("mul", lambda x, y, t: x * y),
    ("mul_number", lambda x, y, t: x * 2),
    ("div", lambda x, y, t: x / y),
    ("neg", lambda x, y, t: -t),
    ("relu", lambda x, y, t: torch.relu(t)),
    ("sigmoid", lambda x, y, t: torch.sigmoid(x)),
    ("tanh", lambda x, y, t: torch.tanh(x)),
    ("exp", lambda x, y, t: torch.exp(x)),
    ("log", lambda x, y, t: torch.log(x.abs())),
    ("sqrt", lambda x, y, t: torch.sqrt(x)),
    ("rsqrt", lambda x, y, t: torch.rsqrt(x)),
    ("reciprocal", lambda x, y, t: torch.reciprocal(x)),
    ("sin", lambda x, y, t: torch.sin(x)),
    ("cos", lambda x, y, t: torch.cos(t)),
    ("pow", lambda x, y, t: x**2),
    ("maximum", lambda x, y, t: torch.maximum(x, y)),
    ("minimum", lambda x, y, t: torch.minimum(x, t)),
    ("eq", lambda x, y, t: x == y),
    ("ne", lambda x, y, t: x != t),
    ("lt", lambda x, y, t: x < y),
    ("gt", lambda x, y, t: x > t),
    ("le", lambda x, y, t: x <= y),
    ("ge", lambda x, y, t: x >= y),
    ("gelu", lambda x, y, t: F.gelu(x)),
    ("gelu_tanh", lambda x, y, t: F.gelu(t, approximate="tanh")),
    ("silu", lambda x, y, t: F.silu(x)),
    ("clamp", lambda x, y, t: torch.clamp(x, min=-0.5, max=0.5)),
    ("where", lambda x, y, t: torch.where(x > 0, x, y)),
    ("threshold_backward", lambda x, y, t: torch.ops.aten.threshold_backward(x, t, 0.0)),
    ("sigmoid_backward", lambda x, y, t: torch.ops.aten.sigmoid_backward(x, t)),
    ("tanh_backward", lambda x, y, t: torch.ops.aten.tanh_backward(x, t)),
    ("gelu_backward", lambda x, y, t: torch.ops.aten.gelu_backward(x, t)),
]

IN_PLACE_OPS = [
    ("add_", lambda s, y, t: s.add_(y, alpha=3)),
    ("sub_", lambda s, y, t: s.sub_(t)),
    ("mul_", lambda s, y, t: s.mul_(y)),
    ("div_", lambda s, y, t: s.div_(2)),
    ("relu_", lambda s, y, t: s.relu_()),
    ("sqrt_", lambda s, y, t: s.abs().sqrt_()),
    ("addcmul_", lambda s, y, t: s.addcmul_(y, t, value=0.5)),
    ("addcdiv_", lambda s, y, t: s.addcdiv_(y, t.abs() + 1, value=2)),
    ("lerp_", lambda s, y, t: s.lerp_(t, 0.25)),
]


def on(device, tensors):
    return [a.to(device) for a in tensors]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name,fn", FLOAT_OPS, ids=[n for n, _ in FLOAT_OPS])
def test_the_lane_queues_each_operator_with_cpus_result(name, fn, dtype):
    expected = fn(*inputs(dtype))
    got, calls = taken(lambda: fn(*on(DEV, inputs(dtype))))
    assert calls >= 1, f"{name} did not take the express lane"
    assert got.device.type == DEV and got.dtype == expected.dtype
    assert got.shape == expected.shape and got.stride() == expected.stride()
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name,fn", IN_PLACE_OPS, ids=[n for n, _ in IN_PLACE_OPS])
def test_in_place_operators_write_self_and_return_it(name, fn):
    x, y, t = inputs()
    expected = fn(x.clone(), y, t)
    xd, yd, td = on(DEV, (x, y, t))
    out, calls = taken(lambda: fn(xd, yd, td))
    assert calls >= 1
    if name != "sqrt_":  # sqrt_ writes a temporary (abs)
        assert out is xd
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def test_integer_and_mixed_type_promotion_as_on_cpu():
    i = torch.arange(-6, 6).reshape(3, 4)
    b = i > 0
    cases = [
        lambda i, b: i + 1.5,  # int tensor, float number: float result
        lambda i, b: i * 3,
        lambda i, b: i / 4,  # true division of integers
        lambda i, b: i + b,  # bool promotes
        lambda i, b: torch.where(b, i, -i),
        lambda i, b: i.half() + i,  # float16 with int64: float16
    ]
    idev, bdev = i.to(DEV), b.to(DEV)
    for fn in cases:
        expected = fn(i, b)
        got, calls = taken(lambda fn=fn: fn(idev, bdev))
        assert calls >= 1
        assert got.dtype == expected.dtype
        assert torch.equal(got.cpu(), expected)


def test_calls_are_queued_not_run_at_the_call():
    x = torch.full((8,), 2.0, device=DEV)
    y = torch.full((8,), 3.0, device=DEV)
    stream = torch.vdev.current_stream()
    with gated(stream):
        (z, w), calls = taken(lambda: (x * y, x.add_(y)))
        assert calls == 2
        assert not stream.query()  # both wait behind the gate
    assert torch.equal(z.cpu(), torch.full((8,), 6.0))
    assert torch.equal(w.cpu(), torch.full((8,), 5.0))
    assert torch.equal(x.cpu(), torch.full((8,), 5.0))


@pytest.mark.parametrize(
    "case",
    ["cpu tensor", "two devices", "self overlaps other", "internal overlap", "empty"],
)
def test_declined_calls_take_the_boxed_path(case):
    x = torch.arange(6.0, device=DEV)
    if case == "cpu tensor":
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            taken(lambda: x + torch.ones(6))
        calls = 0
        before = x.cpu()
    elif case == "two devices":
        with pytest.raises(RuntimeError, match="vdev:0 and vdev:1"):
            taken(lambda: x + torch.ones(6, device="vdev:1"))
        calls = 0
        before = x.cpu()
    elif case == "self overlaps other":
        before = x.cpu()
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written"):
            taken(lambda: x[1:].add_(x[:-1]))  # CPU's own overlap check, on the host
        calls = 0
    elif case == "internal overlap":
        before = x.cpu()
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            taken(lambda: x[:1].expand(3).add_(1))
        calls = 0
    else:
        e = torch.empty(0, device=DEV)
        out, calls = taken(lambda: e + e)
        assert out.shape == (0,) and out.device.type == DEV
        before = None
    assert calls == 0
    if before is not None:
        assert torch.equal(x.cpu(), before)  # nothing changed


def test_the_lane_takes_in_place_calls_the_boxed_path_would_queue():
    # The lane asks the boxed path's overlap rule (checks/overlap.h): self passed twice, and a view
    # of self's storage that does not overlap it, are queued there, so the lane takes them too.
    x = torch.arange(6.0, device=DEV)
    _, calls = taken(lambda: x.add_(x))
    assert calls == 1
    assert torch.equal(x.cpu(), torch.arange(6.0) * 2)
    y = torch.arange(6.0, device=DEV)
    _, calls = taken(lambda: y[:3].mul_(y[3:]))
    assert calls == 1
    expected = torch.arange(6.0)
    expected[:3].mul_(expected[3:])
    assert torch.equal(y.cpu(), expected)


def test_a_call_that_raises_changes_nothing():
    y = torch.ones(3, device=DEV)
    x = torch.ones(2, 3, device=DEV)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        y.add_(x)  # self cannot take the broadcast shape: the meta kernel's error, at the call
    assert torch.equal(y.cpu(), torch.ones(3))


def test_under_the_stream_sanitizer_the_lane_takes_its_calls_and_the_sanitizer_sees_them():
    # The sanitized program runs the host path it checks (issue 53): the lane's launch names its
    # tensors to the sanitizer as the boxed path's does.
    from torch.vdev.sanitizer import StreamRaceError

    x = torch.ones(4, device=DEV)
    torch.vdev.synchronize()
    with torch.vdev.sanitizer.sanitize("streams"):
        x * 2  # the lane learns the signature
        out, calls = taken(lambda: x * 2)
        side = torch.vdev.Stream()
        with torch.vdev.stream(side), pytest.raises(StreamRaceError, match="aten::mul"):
            out.add_(1)  # writes what the lane's call wrote on the default stream, unordered
        torch.vdev.synchronize()
    torch.vdev.sanitizer.clear_findings()
    assert calls == 1
    assert torch.equal(out.cpu(), torch.full((4,), 2.0))


def test_deterministic_mode_is_part_of_the_key():
    x = torch.ones(3, device=DEV)
    a, calls_a = taken(lambda: x + 1)
    torch.use_deterministic_algorithms(True)
    try:
        b, calls_b = taken(lambda: x + 1)  # another key: its own plan, same values
    finally:
        torch.use_deterministic_algorithms(False)
    assert calls_a == calls_b == 1
    assert torch.equal(a.cpu(), b.cpu())


def test_autograd_through_the_lane_matches_cpu():
    def step(device):
        torch.manual_seed(0)
        w = torch.randn(5, 5).to(device).requires_grad_()
        x = torch.randn(3, 5).to(device)
        y = torch.sigmoid(torch.tanh(x * w.sum(0)) + x).relu()
        (y * y).sum().backward()
        return w.grad.cpu()

    torch.testing.assert_close(step(DEV), step("cpu"), rtol=0, atol=0)


def test_threads_keep_their_own_caches():
    def work(k: int):
        x = torch.full((16,), float(k), device=DEV)
        for _ in range(200):
            x = x * 1 + 1
        torch.vdev.synchronize()
        assert torch.equal(x.cpu(), torch.full((16,), float(k + 200)))

    errors = run_in_threads(work, 4)
    assert errors == []


def test_a_captured_graph_replays_lane_calls():
    x = torch.ones(4, device=DEV)
    y = torch.full((4,), 2.0, device=DEV)
    side = torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())
    g = torch.vdev.VdevGraph()
    with torch.vdev.graph(g, stream=side):
        z = x * y + 1
    x.fill_(3.0)
    g.replay()
    torch.vdev.synchronize()
    assert torch.equal(z.cpu(), torch.full((4,), 7.0))


@given(
    shape=st.lists(st.integers(1, 4), min_size=0, max_size=3),
    transpose=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float16, torch.int32, torch.int64]),
    alpha=st.sampled_from([1, 2, -1]),
    in_place=st.booleans(),
)
def test_add_is_cpus_for_any_shape_layout_and_dtype(shape, transpose, dtype, alpha, in_place):
    g = torch.Generator().manual_seed(len(shape))
    a = (torch.randn(shape, generator=g) * 10).to(dtype)
    b = (torch.randn(shape, generator=g) * 10).to(dtype)
    if transpose and a.dim() >= 2:
        a, b = a.transpose(0, 1), b.transpose(0, 1)
    if in_place:
        expected = a.clone().add_(b, alpha=alpha)
        ad = a.to(DEV)
        ad.add_(b.to(DEV), alpha=alpha)
        got = ad
    else:
        expected = torch.add(a, b, alpha=alpha)
        got = torch.add(a.to(DEV), b.to(DEV), alpha=alpha)
        assert got.stride() == expected.stride()
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


def test_a_coefficient_that_changes_every_call_is_not_a_miss():
    # Seven elements: a shape no other test of this file uses (the hypothesis test above draws
    # sizes 1 to 4), so that the integer alpha's key below is new whatever ran before.
    x = torch.zeros(7, device=DEV)
    y = torch.ones(7, device=DEV)
    x.add_(y, alpha=0.5)  # the signature's first call
    misses, calls = rt.express_misses(), rt.express_calls()
    for k in range(1, 21):
        x.add_(y, alpha=k / 10)  # a learning rate that decays: new values, same kind
    assert rt.express_calls() - calls == 20
    assert rt.express_misses() == misses
    assert torch.equal(x.cpu(), torch.full((7,), 0.5 + sum(k / 10 for k in range(1, 21))))
    x.add_(y, alpha=2)  # another kind (an integer): another plan
    assert rt.express_misses() == misses + 1


def test_the_default_dtype_is_part_of_the_key():
    i = torch.arange(4, device=DEV)
    previous = torch.get_default_dtype()
    try:
        for default in (torch.float64, torch.float32, torch.float64):
            torch.set_default_dtype(default)
            (q, calls) = taken(lambda: i / 2)
            assert calls == 1
            assert q.dtype == (torch.arange(4) / 2).dtype == default
            assert torch.equal(q.cpu(), torch.arange(4) / 2)
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize(
    "number", [3, 0.75, True, 0.5 + 2j], ids=["int", "float", "bool", "complex"]
)
def test_python_numbers_of_every_kind_keep_their_value(number):
    x = torch.arange(4.0)
    xd = x.to(DEV)
    expected = [x * number, x + number]
    got, calls = taken(lambda: [xd * number, xd + number])
    assert calls == 2
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        assert torch.equal(g.cpu(), e)


def test_each_call_keeps_its_own_numbers_coefficients_and_addresses():
    # One key, several calls queued behind a gate: a task carries its call's own device addresses,
    # Python numbers and coefficients (the key's shared signature holds none of them).
    xs = [torch.full((3,), float(i), device=DEV) for i in range(4)]
    y = torch.ones(3, device=DEV)
    stream = torch.vdev.current_stream()
    with gated(stream):
        sums, calls = taken(lambda: [x + 0.25 * i for i, x in enumerate(xs)])
        _, in_place = taken(lambda: [x.add_(y, alpha=i) for i, x in enumerate(xs)])
        assert calls == 4 and in_place == 4
        assert not stream.query()
    for i in range(4):
        assert torch.equal(sums[i].cpu(), torch.full((3,), i + 0.25 * i))
        assert torch.equal(xs[i].cpu(), torch.full((3,), 2.0 * i))


def test_one_tensor_passed_twice_is_one_view_and_two_views_are_two():
    a = torch.arange(9.0).reshape(3, 3)
    ad = a.to(DEV)
    cases = [
        lambda t: t + t,
        lambda t: t * t,
        lambda t: t - t.t(),
        lambda t: torch.maximum(t, t.t()),
    ]
    for fn in cases:
        got, calls = taken(lambda fn=fn: fn(ad))
        assert calls == 1
        assert torch.equal(got.cpu(), fn(a))
