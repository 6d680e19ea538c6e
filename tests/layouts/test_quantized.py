"""Quantized tensors on vdev, checked against CPU: quantization, dequantization, integer
representation and parameters, copies between devices, views, and the quantized operators CUDA
registers. Operators CUDA lacks raise NotImplementedError at the call, naming the operator."""

import pytest
import torch

DEV = "vdev"

QDTYPES = [torch.qint8, torch.quint8, torch.qint32]


def values(seed=0, *shape):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*(shape or (4, 6)), generator=g) * 3


def same_quantized(q, want):
    """Same dtype, scheme, parameters, sizes and integer representation; q lives on vdev."""
    assert q.device.type == DEV and q.is_quantized
    assert q.dtype == want.dtype and q.qscheme() == want.qscheme() and q.shape == want.shape
    if want.qscheme() == torch.per_tensor_affine:
        assert (q.q_scale(), q.q_zero_point()) == (want.q_scale(), want.q_zero_point())
    else:
        assert q.q_per_channel_axis() == want.q_per_channel_axis()
        assert q.q_per_channel_scales().device.type == DEV
        assert torch.equal(q.q_per_channel_scales().cpu(), want.q_per_channel_scales())
        assert torch.equal(q.q_per_channel_zero_points().cpu(), want.q_per_channel_zero_points())
    assert torch.equal(q.int_repr().cpu(), want.int_repr())


@pytest.mark.parametrize("dtype", QDTYPES)
def test_quantize_per_tensor_matches_cpu(dtype):
    x = values(1)
    want = torch.quantize_per_tensor(x, 0.07, 3 if dtype != torch.qint32 else 0, dtype)
    q = torch.quantize_per_tensor(x.to(DEV), 0.07, 3 if dtype != torch.qint32 else 0, dtype)
    same_quantized(q, want)
    assert q.int_repr().device.type == DEV
    assert torch.equal(q.dequantize().cpu(), want.dequantize())
    assert q.dequantize().device.type == DEV


@pytest.mark.parametrize("dtype", [torch.qint8, torch.quint8])
def test_quantize_per_channel_matches_cpu(dtype):
    x = values(2)
    scales, zps = (
        torch.tensor([0.1, 0.05, 0.2, 0.02], dtype=torch.float64),
        torch.tensor([0, 1, 2, 3]),
    )
    want = torch.quantize_per_channel(x, scales, zps, 0, dtype)
    q = torch.quantize_per_channel(x.to(DEV), scales.to(DEV), zps.to(DEV), 0, dtype)
    same_quantized(q, want)
    assert torch.equal(q.dequantize().cpu(), want.dequantize())


def test_dynamic_and_tensor_parameter_forms_match_cpu():
    x = values(3)
    same_quantized(
        torch.quantize_per_tensor_dynamic(x.to(DEV), torch.quint8, False),
        torch.quantize_per_tensor_dynamic(x, torch.quint8, False),
    )
    scale, zp = torch.tensor(0.1), torch.tensor(2)
    same_quantized(
        torch.quantize_per_tensor(x.to(DEV), scale.to(DEV), zp.to(DEV), torch.quint8),
        torch.quantize_per_tensor(x, scale, zp, torch.quint8),
    )
    ints = torch.randint(-100, 100, (3, 5), dtype=torch.int8)
    same_quantized(
        torch._make_per_tensor_quantized_tensor(ints.to(DEV), 0.5, 1),
        torch._make_per_tensor_quantized_tensor(ints, 0.5, 1),
    )


@pytest.mark.parametrize("dtype", QDTYPES)
def test_copies_between_cpu_and_devices_lose_nothing(dtype):
    want = torch.quantize_per_tensor(values(4), 0.05, 0, dtype)
    for path in (["vdev:0"], ["vdev:1"], ["vdev:0", "vdev:1"], ["vdev:1", "vdev:0"]):
        q = want
        for device in path:
            q = q.to(device)
            assert q.device == torch.device(device)
        same_quantized(q, want)
        back = q.cpu()
        assert back.device.type == "cpu" and torch.equal(back.int_repr(), want.int_repr())


def test_per_channel_copies_keep_their_parameters():
    want = torch.quantize_per_channel(
        values(5),
        torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64),
        torch.zeros(4, dtype=torch.long),
        0,
        torch.qint8,
    )
    q = want.to("vdev:1")
    assert q.q_per_channel_scales().device == torch.device("vdev:1")
    same_quantized(q, want)
    same_quantized(q.to("vdev:0"), want)
    assert torch.equal(q.cpu().dequantize(), want.dequantize())


def test_views_share_the_device_bytes():
    want = torch.quantize_per_tensor(values(6), 0.05, 2, torch.quint8)
    q = want.to(DEV)
    for fn in (
        lambda t: t.view(6, 4),
        lambda t: t[1:3],
        lambda t: t.transpose(0, 1),
        lambda t: t.select(1, 2),
        lambda t: t.unsqueeze(0),
        lambda t: t.flip(0),
        lambda t: t.clone(),
    ):
        same_quantized(fn(q), fn(want))
    assert q.view(6, 4).untyped_storage().data_ptr() == q.untyped_storage().data_ptr()


def test_quantized_operators_cuda_registers_match_cpu():
    want = torch.quantize_per_tensor(values(7, 1, 2, 6, 6), 0.05, 10, torch.quint8)
    q = want.to(DEV)
    same_quantized(torch.relu(q), torch.relu(want))
    same_quantized(torch.nn.functional.gelu(q), torch.nn.functional.gelu(want))
    same_quantized(
        torch.nn.functional.adaptive_avg_pool2d(q, (3, 3)),
        torch.nn.functional.adaptive_avg_pool2d(want, (3, 3)),
    )
    same_quantized(
        q.index_select(3, torch.tensor([0, 5], device=DEV)),
        want.index_select(3, torch.tensor([0, 5])),
    )
    mask = values(8, 1, 2, 6, 6) > 0
    same_quantized(q.masked_fill(mask.to(DEV), 0.5), want.masked_fill(mask, 0.5))
    maxes, where = q.max(dim=3)
    want_max, want_where = want.max(dim=3)
    same_quantized(maxes, want_max)
    assert torch.equal(where.cpu(), want_where)
    r = q.clone()
    r.relu_()
    same_quantized(r, torch.relu(want))
    f = q.clone()
    f.fill_(1.0)
    assert torch.equal(f.dequantize().cpu(), want.clone().fill_(1.0).dequantize())


def test_operators_cuda_lacks_raise_not_implemented_at_the_call():
    q = torch.quantize_per_tensor(values(9), 0.05, 0, torch.quint8).to(DEV)
    # quantized::add has a QuantizedCPU kernel only.
    with pytest.raises(NotImplementedError, match=r"quantized::add.*vdev"):
        torch.ops.quantized.add(q, q, 0.1, 0)
    # quantized_batch_norm: QuantizedCPU only in native_functions.yaml.
    x = torch.quantize_per_tensor(values(10, 1, 4, 2, 2), 0.05, 0, torch.quint8).to(DEV)
    with pytest.raises(NotImplementedError, match=r"quantized_batch_norm.*vdev"):
        w = torch.ones(4, device=DEV)
        torch.quantized_batch_norm(x, w, w, w, w, 1e-5, 0.1, 0)


def test_no_quantized_result_is_left_uninitialised():
    """The init tool (VDEV_SANITIZER=init) reports reads of bytes nothing wrote."""
    from child_process import run_python

    r = run_python(
        """
        import torch, torch_vdev
        x = torch.randn(4, 6, device="vdev")
        q = torch.quantize_per_tensor(x, 0.05, 3, torch.quint8)
        c = torch.quantize_per_channel(x, torch.full((4,), 0.1, dtype=torch.float64,
            device="vdev"), torch.zeros(4, dtype=torch.long, device="vdev"), 0, torch.qint8)
        for t in (q, c, q.clone(), q.to("vdev:1"), torch.relu(q), q.flip(0)):
            t.int_repr().sum().item()
            t.dequantize().sum().item()
        print("clean")
        """,
        env={"VDEV_SANITIZER": "init"},
    )
    assert r.returncode == 0, r.stderr
    assert "clean" in r.stdout and "uninitial" not in (r.stdout + r.stderr).lower()


def test_fused_observer_fake_quant_updates_its_state_as_on_cpu():
    """fused_moving_avg_obs_fake_quant writes running_min/max, scale and zero_point, which it does
    not return: the executor must not run it through ATen's generated out= overload, which would
    drop those writes (QAT's default fake-quant never learned its scale)."""
    x = values(11) * 3
    states = []
    for device in ("cpu", DEV):
        state = [
            torch.tensor([float("inf")], device=device),
            torch.tensor([float("-inf")], device=device),
            torch.tensor([1.0], device=device),
            torch.tensor([0], dtype=torch.int32, device=device),
        ]
        on = torch.tensor([1], device=device)
        for _ in range(3):
            out = torch.fused_moving_avg_obs_fake_quant(
                x.to(device), on, on, *state, 0.01, 0, 255, -1
            )
        states.append([t.cpu() for t in state] + [out.cpu()])
    for got, want in zip(states[1], states[0], strict=True):
        assert torch.equal(got, want)
    module = torch.ao.quantization.FusedMovingAvgObsFakeQuantize()
    moved = torch.ao.quantization.FusedMovingAvgObsFakeQuantize().to(DEV)
    for _ in range(3):
        want, got = module(x), moved(x.to(DEV))
    assert torch.equal(got.cpu(), want)
    assert torch.equal(moved.scale.cpu(), module.scale)


def test_quantize_dequantize_int_repr_and_clone_are_queued_as_on_cuda():
    from asyncutil import gated, run_bounded, wait_until_blocked

    x = values(12, 2, 3, 4, 5)
    xv = x.to(DEV)
    xcl = x.contiguous(memory_format=torch.channels_last)
    xclv = xcl.to(DEV)
    torch.vdev.synchronize()
    results = []
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)

        def calls():
            torch.vdev.set_sync_debug_mode("error")
            try:
                q = torch.quantize_per_tensor(xv, 0.05, 3, torch.quint8)
                qcl = torch.quantize_per_tensor(xclv, 0.05, 3, torch.qint8)
                results.extend([q, q.dequantize(), q.int_repr(), q.clone(), qcl, qcl.dequantize()])
            finally:
                torch.vdev.set_sync_debug_mode(0)

        assert run_bounded(calls)  # none waited for the blocked stream
    want = torch.quantize_per_tensor(x, 0.05, 3, torch.quint8)
    want_cl = torch.quantize_per_tensor(xcl, 0.05, 3, torch.qint8)
    q, deq, ints, clone, qcl, deq_cl = results
    same_quantized(q, want)
    same_quantized(clone, want)
    assert torch.equal(deq.cpu(), want.dequantize())
    assert torch.equal(ints.cpu(), want.int_repr())
    same_quantized(qcl, want_cl)
    assert qcl.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(deq_cl.cpu(), want_cl.dequantize())


def test_a_wrong_quantization_parameter_raises_cpus_error_at_the_call():
    x = values(13)
    for args in ((0.05, 300, torch.quint8), (0.05, 0, torch.float32)):
        with pytest.raises(RuntimeError) as cpu:
            torch.quantize_per_tensor(x, *args)
        with pytest.raises(RuntimeError) as got:
            torch.quantize_per_tensor(x.to(DEV), *args)
        assert str(got.value).split("\n")[0] == str(cpu.value).split("\n")[0]
    torch.vdev.synchronize()  # nothing was queued that fails later


def test_fake_quantization_is_queued_and_matches_cpu():
    """The fake-quantization kernels of quantization-aware training have meta kernels on vdev
    (ops/meta_kernels.cpp), so they are queued as on CUDA; CPU's checks still raise at the call."""
    from asyncutil import sync_warnings

    x = values(14, 2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    scale, zp = torch.tensor([0.1, 0.2, 0.05]), torch.tensor([0, 3, 1], dtype=torch.int32)
    xv, sv, zv = x.to(DEV), scale.to(DEV), zp.to(DEV)
    lscale, lzp = torch.tensor([0.1]), torch.tensor([2.0])
    lsv, lzv = lscale.to(DEV), lzp.to(DEV)
    torch.vdev.synchronize()
    got = []
    assert (
        sync_warnings(
            lambda: got.extend(
                [
                    torch.fake_quantize_per_tensor_affine(xv, 0.1, 3, 0, 255),
                    torch.fake_quantize_per_channel_affine(xv, sv, zv, 1, 0, 255),
                    torch._fake_quantize_learnable_per_tensor_affine(xv, lsv, lzv, 0, 255),
                ]
            )
        )
        == []
    )
    want = [
        torch.fake_quantize_per_tensor_affine(x, 0.1, 3, 0, 255),
        torch.fake_quantize_per_channel_affine(x, scale, zp, 1, 0, 255),
        torch._fake_quantize_learnable_per_tensor_affine(x, lscale, lzp, 0, 255),
    ]
    for g, w in zip(got, want, strict=True):
        assert g.stride() == w.stride()
        assert torch.equal(g.cpu(), w)
    with pytest.raises(RuntimeError, match="quant_min"):
        torch.fake_quantize_per_tensor_affine(xv, 0.1, 0, 10, 5)
    torch.vdev.synchronize()
