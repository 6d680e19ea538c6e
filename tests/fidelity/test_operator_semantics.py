"""Queued operators behave as the functional operator on CPU: the same checks on empty inputs, the
memory format CPU and CUDA keep, and launch plans keyed by everything that changes a result."""

import pytest
import torch
import torch.nn.functional as F

EMPTY = {
    "max()": lambda d: torch.zeros(0, device=d).max(),
    "min()": lambda d: torch.zeros(0, device=d).min(),
    "mode over an empty dim": lambda d: torch.zeros(0, 3, device=d).mode(0),
    "argmax()": lambda d: torch.zeros(0, device=d).argmax(),
    "kthvalue": lambda d: torch.zeros(0, device=d).kthvalue(1),
    "max over an empty dim": lambda d: torch.zeros(0, 3, device=d).max(0),
}


@pytest.mark.parametrize("name", sorted(EMPTY))
def test_an_empty_reduction_raises_cpus_error_at_the_call(name):
    with pytest.raises(Exception) as on_cpu:
        EMPTY[name]("cpu")
    with pytest.raises(type(on_cpu.value)) as on_vdev:
        EMPTY[name]("vdev")
    assert str(on_vdev.value) == str(on_cpu.value)
    torch.vdev.synchronize()  # nothing left to fail on the stream


def test_empty_inputs_that_cpu_accepts_still_compute():
    for d in ("cpu", "vdev"):
        x = torch.zeros(0, 3, device=d)
        got = [x.sum(), x.max(1).values, x.amax(1), x.mean(0), torch.cat([x, x])]
        if d == "cpu":
            ref = got
        else:
            for a, b in zip(got, ref, strict=True):
                assert a.device.type == "vdev" and a.shape == b.shape
                torch.testing.assert_close(a.cpu(), b, equal_nan=True)


CL, CL3 = torch.channels_last, torch.channels_last_3d


@pytest.mark.parametrize(
    "dims, fmt, which",
    [(2, CL, "input"), (2, CL, "weight"), (3, CL3, "input"), (2, CL, "neither")],
)
def test_a_convolution_keeps_the_memory_format_cpu_keeps(dims, fmt, which):
    torch.manual_seed(0)
    shape = (2, 3) + (6,) * dims
    x, w = torch.randn(shape), torch.randn((4, 3) + (3,) * dims)
    if which == "input":
        x = x.to(memory_format=fmt)
    elif which == "weight":
        w = w.to(memory_format=fmt)
    conv = F.conv2d if dims == 2 else F.conv3d
    results = {}
    for d in ("cpu", "vdev"):
        xd = x.to(d).requires_grad_()
        wd = w.to(d).requires_grad_()
        y = conv(xd, wd)
        (gx, gw) = torch.autograd.grad(y, (xd, wd), torch.ones_like(y))
        results[d] = (y, gx, gw)
    for cpu_t, vdev_t in zip(results["cpu"], results["vdev"], strict=True):
        assert vdev_t.stride() == cpu_t.stride()
        torch.testing.assert_close(vdev_t.cpu(), cpu_t, rtol=1e-4, atol=1e-4)


def test_group_norm_of_a_channels_last_input_is_contiguous_as_on_cuda():
    # ATen's group_norm keeps a channels-last input only on CPU and PrivateUse1 (group_norm.cpp);
    # on CUDA the input is made contiguous, and so are the output and the input's gradient. vdev
    # gives CUDA's layout (executor/allocated_layouts.cpp) with CPU's values.
    torch.manual_seed(0)
    x = torch.randn(2, 4, 3, 3).to(memory_format=CL)
    gn = torch.nn.GroupNorm(2, 4)
    ref = gn(x.requires_grad_())
    (ref_gx,) = torch.autograd.grad(ref, x, torch.ones_like(ref))
    assert ref.is_contiguous(memory_format=CL) and not ref.is_contiguous()  # CPU's
    xd = x.detach().to("vdev").requires_grad_()
    y = gn.to("vdev")(xd)
    (gx,) = torch.autograd.grad(y, xd, torch.ones_like(y))
    assert y.is_contiguous()
    torch.testing.assert_close(y.cpu(), ref)
    torch.testing.assert_close(gx.cpu(), ref_gx)


def test_a_python_scalar_and_a_0_dim_tensor_promote_differently_in_one_program():
    # Same sizes, strides and dtypes: only the wrapped-number flag tells these calls apart.
    for d in ("cpu", "vdev"):
        x = torch.tensor(1.5, device=d)
        calls = [x + 2.5, x + torch.tensor(2.5, dtype=torch.float64), x + 2.5]
        assert [t.dtype for t in calls] == [torch.float32, torch.float64, torch.float32]
        assert all(t.device.type == d for t in calls)


BATCH_NORM = {
    "evaluation float32": (False, torch.float32),
    "evaluation bfloat16": (False, torch.bfloat16),
    "training float16": (True, torch.float16),
    "training bfloat16": (True, torch.bfloat16),
}


@pytest.mark.parametrize("name", sorted(BATCH_NORM))
def test_batch_norm_is_queued_and_returns_what_cpu_returns(name):
    from asyncutil import gated, run_bounded, sid, wait_until_blocked

    from torch_vdev import _testing as rt

    training, dtype = BATCH_NORM[name]
    torch.manual_seed(0)
    x = torch.randn(4, 3, 5, 5).to(dtype)
    stats = [torch.rand(3).to(dtype), torch.rand(3).to(dtype) + 1]
    weight, bias = torch.rand(3).to(dtype), torch.rand(3).to(dtype)

    def call(args, running):
        return torch.ops.aten.native_batch_norm(*args, *running, training, 0.1, 1e-5)

    args = [t.to("vdev") for t in (x, weight, bias)]  # copied before the gate closes
    running = [s.to("vdev") for s in stats]
    want = call((x, weight, bias), stats)  # updates `stats` in training mode
    stream = torch.vdev.current_stream()
    got = []
    with gated(stream) as gate:
        wait_until_blocked(gate)
        assert run_bounded(lambda: got.append(call(args, running))), "batch norm synchronized"
        assert not rt.stream_query(*sid(stream))
    for g, w in zip(got[0], want, strict=True):
        assert (g.shape, g.dtype, g.stride()) == (w.shape, w.dtype, w.stride())
        torch.testing.assert_close(g.cpu(), w)
    for g, w in zip(running, stats, strict=True):  # running statistics updated as on CPU
        torch.testing.assert_close(g.cpu(), w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_of_a_transposed_input_equals_cpus(dtype, training):
    # [B, L, C] transposed to [B, C, L]: contiguous in no memory format (CPU's out= kernel alone
    # would normalise with a wrong mean).
    torch.manual_seed(0)
    x = torch.randn(8, 50, 16).to(dtype)
    ref = torch.nn.BatchNorm1d(16).to(dtype).train(training)
    moved = torch.nn.BatchNorm1d(16).to(dtype).train(training).to("vdev")
    want = ref(x.transpose(1, 2))
    got = moved(x.to("vdev").transpose(1, 2))
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(moved.running_mean.cpu(), ref.running_mean)
    torch.testing.assert_close(moved.running_var.cpu(), ref.running_var)


EMBEDDING_BAG = {
    "sum": {"mode": "sum"},
    "mean": {"mode": "mean"},
    "max": {"mode": "max"},
    "sum with per-sample weights": {"mode": "sum", "per_sample_weights": True},
    "mean with padding_idx": {"mode": "mean", "padding_idx": 2},
    "sum with include_last_offset": {"mode": "sum", "include_last_offset": True},
}


@pytest.mark.parametrize("name", sorted(EMBEDDING_BAG))
def test_embedding_bag_is_queued_and_equals_cpu_forward_and_backward(name):
    from asyncutil import gated, run_bounded, sid, wait_until_blocked

    from torch_vdev import _testing as rt

    kwargs = dict(EMBEDDING_BAG[name])
    torch.manual_seed(0)
    weight = torch.randn(10, 4)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 3, 5, 8] if kwargs.get("include_last_offset") else [0, 3, 5])
    psw = torch.rand(8) if kwargs.pop("per_sample_weights", False) else None

    def run(dev, inputs):
        w = inputs[0].requires_grad_()
        out = F.embedding_bag(inputs[1], w, inputs[2], per_sample_weights=inputs[3], **kwargs)
        (grad,) = torch.autograd.grad((out * torch.arange(4.0, device=dev)).sum(), w)
        return out, grad

    want = run("cpu", [weight.clone(), indices, offsets, psw])
    moved = [t.to("vdev") if t is not None else None for t in (weight, indices, offsets, psw)]
    stream = torch.vdev.current_stream()
    got = []
    with gated(stream) as gate:
        wait_until_blocked(gate)
        assert run_bounded(lambda: got.append(run("vdev", moved))), "embedding_bag synchronized"
        assert not rt.stream_query(*sid(stream))
    for g, w in zip(got[0], want, strict=True):
        torch.testing.assert_close(g.cpu(), w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("op", ["sub", "rsub", "mul", "add", "div"])
def test_a_python_scalar_with_a_0_dim_tensor_computes_in_the_tensors_dtype(op, dtype):
    # A Python scalar reaches the kernel as a "wrapped number": it takes part in type promotion
    # below a 0-dim tensor, so CPU and CUDA compute in the tensor's dtype (a queued task once
    # snapshotted it as a plain 0-dim double tensor, and computed in double).
    t = torch.tensor(0.045423004776239395).to(dtype)
    ref = getattr(torch, op)(t, 0.3)
    got = getattr(torch, op)(t.to("vdev"), 0.3)
    assert got.dtype == ref.dtype
    torch.testing.assert_close(got.cpu(), ref, rtol=0, atol=0)


def test_conj_physical_in_place_runs_on_the_device():
    # Its CompositeExplicitAutograd kernel calls a DispatchStub by device type (no vdev kernel).
    z = torch.randn(5, dtype=torch.complex64)
    zv = z.to("vdev")
    assert zv.conj_physical_() is zv
    assert torch.equal(zv.cpu(), z.conj_physical())


OUT_OVERLAPS = {
    "the same tensor as input and out": lambda d: torch.masked_select(
        x := torch.arange(6.0, device=d), x > 2, out=x
    ),
    "an empty out that is also a listed input": lambda d: torch.cat(
        (x := torch.zeros(0, device=d), torch.randn(4, 6, device=d)), out=x
    ),
    "an out that overlaps the index once resized": lambda d: torch.gather(
        i := torch.tensor([2, 1, 0], device=d), 0, i[1:], out=i[:1]
    ),
}


@pytest.mark.parametrize("name", sorted(OUT_OVERLAPS))
def test_an_out_tensor_overlapping_an_input_is_refused_at_the_call(name):
    with pytest.raises(RuntimeError, match="unsupported operation") as on_cpu:
        OUT_OVERLAPS[name]("cpu")
    with pytest.raises(RuntimeError) as on_vdev:
        OUT_OVERLAPS[name]("vdev")
    assert str(on_vdev.value) == str(on_cpu.value)
    torch.vdev.synchronize()


def test_an_out_tensor_resized_by_cpus_kernel_keeps_the_kernels_layout():
    # linalg_lstsq runs on the host (no meta kernel); its solution is column-major on CPU and CUDA.
    a, b = torch.randn(4, 3), torch.randn(4, 2)
    ref = torch.linalg.lstsq(a, b).solution
    got = torch.linalg.lstsq(a.to("vdev"), b.to("vdev")).solution
    assert got.stride() == ref.stride()
    torch.testing.assert_close(got.cpu(), ref)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_layer_norm_backward_in_half_types_matches_cpu(dtype):
    # vdev's forward keeps mean and rstd in float, as CUDA does; CPU's backward wants the input's.
    x, w = torch.randn(4, 8, dtype=dtype), torch.randn(8, dtype=dtype)
    xc, xv = x.clone().requires_grad_(), x.to("vdev").requires_grad_()
    F.layer_norm(xc, (8,), w).sum().backward()
    F.layer_norm(xv, (8,), w.to("vdev")).sum().backward()
    torch.testing.assert_close(xv.grad.cpu(), xc.grad)


def test_a_missing_tangent_is_a_zero_tensor_so_a_nan_primal_does_not_spread():
    # Forward AD of total / count with no tangent for count: the formula's other_t * result term
    # uses a ZeroTensor (_efficientzerotensor), which arithmetic skips; real zeros made it NaN.
    import torch.autograd.forward_ad as fwAD

    z = torch._efficientzerotensor((2, 3), device="vdev")
    assert z._is_zerotensor() and z.device.type == "vdev"
    tangents = {}
    for d in ("cpu", "vdev"):
        x = torch.tensor([float("nan"), 1.0, 2.0], device=d)
        with fwAD.dual_level():
            total = fwAD.make_dual(x, torch.tensor([1.0, 2.0, 3.0], device=d)).sum()
            r = total / torch.ones(3, device=d).sum()
            tangents[d] = fwAD.unpack_dual(r).tangent.cpu()
    assert torch.equal(tangents["vdev"], tangents["cpu"]) and tangents["cpu"].item() == 2.0


POINTWISE_LAYOUTS = {
    "abs of a transposed tensor": lambda a, b: torch.abs(a.mT),
    "abs into an empty out= tensor": lambda a, b: torch.abs(
        a.mT, out=torch.empty(0, device=a.device)
    ),
    "copysign of two layouts": lambda a, b: torch.copysign(a.permute(2, 0, 1), b),
    "logical_and of two layouts": lambda a, b: torch.logical_and(a.permute(2, 0, 1), b),
    "complex": lambda a, b: torch.complex(a.permute(2, 0, 1), b),
    "floor_divide": lambda a, b: torch.floor_divide(a.permute(2, 0, 1), b),
}


@pytest.mark.parametrize("name", sorted(POINTWISE_LAYOUTS))
def test_pointwise_outputs_keep_the_inputs_layout_as_tensor_iterator_does(name):
    # CPU's and CUDA's TensorIterator give an output it allocates its inputs' permutation; some of
    # PyTorch's Python meta functions say contiguous.
    a, b = torch.randn(5, 6, 2), torch.randn(2, 5, 6)
    ref = POINTWISE_LAYOUTS[name](a, b)
    got = POINTWISE_LAYOUTS[name](a.to("vdev"), b.to("vdev"))
    assert got.stride() == ref.stride()
    torch.testing.assert_close(got.cpu(), ref, equal_nan=True)
