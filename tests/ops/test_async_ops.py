"""Asynchronous operators: queued on the current stream, computed on the device bytes, ordered by
streams and events, errors surfaced at the next synchronize (checked with gates, never timing)."""

import threading

import pytest
import torch
from asyncutil import (
    assert_raises_failure_queued_on,
    assert_refused_before_waiting,
    gated,
    on_stream,
    wait_until_blocked,
)

import torch_vdev
from child_process import run_python


def test_operators_return_before_they_run_and_compute_the_right_values():
    x = torch.arange(12.0, device="vdev").reshape(3, 4)
    out = torch.empty(3, device="vdev")
    s = torch.vdev.current_stream()
    with gated(s):
        y = x * 2 + 1  # functional (out= overload)
        m = torch.mm(x, x.t())  # functional
        torch.sum(x, 1, out=out)  # out=
        x.add_(100)  # in-place
        v, i = x.max(dim=1)  # several outputs
        assert not s.query()  # all of it is still queued behind the gate
    ref = torch.arange(12.0).reshape(3, 4)
    torch.testing.assert_close(y.cpu(), ref * 2 + 1)
    torch.testing.assert_close(m.cpu(), ref @ ref.t())
    torch.testing.assert_close(out.cpu(), ref.sum(1))
    torch.testing.assert_close(x.cpu(), ref + 100)
    torch.testing.assert_close(v.cpu(), (ref + 100).max(dim=1).values)
    assert i.cpu().tolist() == [3, 3, 3]


def test_outputs_are_allocated_on_the_operands_device_not_the_current_one():
    x = torch.ones(4, device="vdev:1")
    with gated(torch.vdev.current_stream(1)):
        y = x + 1
        assert y.device == torch.device("vdev:1")
        assert torch_vdev._testing.pointer_device(y.data_ptr()) == 1  # vdev:1's memory
    assert torch.vdev.current_device() == 0
    assert y.cpu().tolist() == [2, 2, 2, 2]


def test_data_dependent_operators_synchronize():
    s = torch.vdev.Stream()  # their stream: the current one, not the default stream
    with torch.vdev.stream(s):
        x = torch.tensor([0.0, 3.0, 0.0, 5.0], device="vdev")
        with gated(s) as gate:
            x.sub_(3)  # queued: [-3, 0, -3, 2] changes which entries are nonzero
            mask = x > 0  # queued too
            done = torch.vdev.Event()
            done.record(s)
            wait_until_blocked(gate)
            # They make the host wait, decided at the call (a queued nonzero fails this).
            assert_refused_before_waiting(on_stream(s, lambda: x.nonzero()), "aten::nonzero")
            assert_refused_before_waiting(on_stream(s, lambda: x[mask]), "aten::nonzero")
            assert not done.query()  # the sub_ is still queued
        # The gate is open, the sub_ may not have run yet: nonzero returns once it has.
        nz = x.nonzero()
        assert done.query()
        assert nz.cpu().flatten().tolist() == [0, 2, 3]  # stale data would give [1, 3]
        assert x[mask].cpu().tolist() == [2.0]
        # They wait for their stream: a failure queued there before them is theirs to raise.
        assert_raises_failure_queued_on(s, lambda: x.nonzero())
        assert_raises_failure_queued_on(s, lambda: x[mask])
    assert x.nonzero().cpu().flatten().tolist() == [0, 2, 3]  # nothing was lost


def test_a_failing_kernel_surfaces_at_the_next_synchronize_naming_the_operator():
    x = torch.arange(6.0, device="vdev")
    idx = torch.tensor([10], device="vdev")
    y = x[idx]  # queued: the index is checked on the worker
    # A device-side assert on CUDA (tests/streams/test_device_asserts.py): AcceleratorError, with
    # CPU's message and the operator
    with pytest.raises(torch.AcceleratorError, match=r"\[aten::index\] index 10 is out of bounds"):
        torch.vdev.synchronize()
    del y


def test_launch_blocking_reports_the_error_at_the_operation():
    r = run_python(
        """
        import torch
        x = torch.arange(6.0, device="vdev")
        try:
            x[torch.tensor([10], device="vdev")]
        except torch.AcceleratorError as e:
            print("AT OP:", e)
        """,
        env={"VDEV_LAUNCH_BLOCKING": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert (
        "AT OP: vdev error: device-side assert triggered: [aten::index] index 10 is out" in r.stdout
    )


def test_two_streams_run_in_the_order_their_events_define():
    a, b = torch.vdev.Stream(), torch.vdev.Stream()
    x = torch.zeros(1000, device="vdev")
    # x's zero fill was queued on the current stream: a's add_ is ordered after it, as CUDA code
    # must order it (unordered, the add_ could read the reused block before the fill).
    a.wait_stream(torch.vdev.current_stream())
    with gated(a):
        with torch.vdev.stream(a):
            x.add_(1)
            done = a.record_event()
        with torch.vdev.stream(b):
            b.wait_event(done)
            y = x * 10  # must see x after a's add_
        assert not b.query()
    b.synchronize()
    assert y.cpu().unique().tolist() == [10.0]


def test_a_tensor_written_on_one_stream_and_read_on_another_after_wait_stream():
    producer, consumer = torch.vdev.Stream(1), torch.vdev.Stream(1)
    with gated(producer):
        with torch.vdev.stream(producer):
            t = torch.full((256,), 3.0, device="vdev:1")
            t.mul_(2)
        consumer.wait_stream(producer)
        with torch.vdev.stream(consumer):
            u = t + 1
    consumer.synchronize()
    assert u.cpu().unique().tolist() == [7.0]


def test_worker_does_not_depend_on_the_callers_thread_local_state():
    x = torch.ones(3, device="vdev", requires_grad=True)
    with torch.inference_mode():
        y = x * 2  # queued while the host is in inference mode
    with torch.no_grad():
        z = x + 1
    torch.testing.assert_close(y.cpu(), torch.full((3,), 2.0))
    torch.testing.assert_close(z.cpu(), torch.full((3,), 2.0))
    w = (x * 3).sum()  # and autograd still works on the same thread afterwards
    w.backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((3,), 3.0))


def test_workers_use_the_hosts_intra_op_thread_count_at_most_the_device_threads():
    # torch.set_num_threads is process-wide on CPU; stream workers must follow it, or two streams
    # each running multi-threaded kernels oversubscribe the cores instead of overlapping. They use
    # at most VDEV_DEVICE_THREADS, and setting it on a worker changes nothing on the host: a
    # thread started afterwards still gets the host's count.
    r = run_python(
        """
        import threading
        import torch
        from torch_vdev import _testing as testing
        seen = []
        for n in (1, 2, 3, 1):
            torch.set_num_threads(n)
            seen.append(testing.worker_intra_op_threads(0))
            with torch.vdev.stream(torch.vdev.Stream()):
                seen.append(testing.worker_intra_op_threads(0))
        torch.set_num_threads(3)
        testing.worker_intra_op_threads(0)  # the worker now runs 2
        other = []
        t = threading.Thread(target=lambda: other.append(torch.get_num_threads()))
        t.start()
        t.join()
        print(seen, torch.get_num_threads(), other)
        """,
        env={"VDEV_DEVICE_THREADS": "2"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("]", 1)[0] + "]" == "[1, 1, 2, 2, 2, 2, 1, 1]"
    assert r.stdout.split("]", 1)[1].split() == ["3", "[3]"]


def test_lazy_conjugate_and_negative_views_copy_correctly():
    c = torch.tensor([1 + 2j, 3 - 1j], device="vdev")
    assert c.conj().cpu().tolist() == [1 - 2j, 3 + 1j]
    assert c.conj().to("vdev:1").cpu().tolist() == [1 - 2j, 3 + 1j]
    assert (c.conj() * 1).cpu().tolist() == [1 - 2j, 3 + 1j]
    n = torch._neg_view(torch.tensor([1.0, 2.0], device="vdev"))
    assert n.cpu().tolist() == [-1.0, -2.0]


@pytest.mark.parametrize("device", ["vdev:0", "vdev:1"])
def test_convolutions_forward_and_backward_match_cpu(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(4, 2, 3, stride=2, groups=2),
    )
    x = torch.randn(2, 3, 8, 8)
    ref = model(x)
    ref.sum().backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.to(device)
    xv = x.to(device).requires_grad_()
    out = model(xv)
    out.sum().backward()
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    for p, g in zip(model.parameters(), ref_grads, strict=True):
        assert p.grad.device == torch.device(device)
        torch.testing.assert_close(p.grad.cpu(), g, atol=1e-4, rtol=1e-4)
    assert xv.grad.shape == x.shape


def test_convolution_shapes_are_cached_per_signature_and_errors_still_raise_at_the_call():
    # vdev caches the meta convolution's output sizes by everything it reads; each argument that
    # changes the shape, or makes it invalid, gives CPU's answer, also after a cached call.
    F = torch.nn.functional
    x = torch.randn(1, 4, 9, 9)
    w = torch.randn(6, 2, 3, 3)
    wt = torch.randn(4, 3, 3, 3)  # transposed: (in, out / groups, kh, kw)
    calls = [
        lambda x, w, wt: F.conv2d(x, w, groups=2),
        lambda x, w, wt: F.conv2d(x, w, groups=2, stride=2),
        lambda x, w, wt: F.conv2d(x, w, groups=2, padding=2, dilation=2),
        lambda x, w, wt: F.conv2d(x[:, :, :7], w, groups=2),
        lambda x, w, wt: F.conv_transpose2d(x, wt, groups=2, output_padding=1, stride=2),
    ]
    for _ in range(2):
        for call in calls:
            got = call(x.to("vdev"), w.to("vdev"), wt.to("vdev"))
            torch.testing.assert_close(got.cpu(), call(x, w, wt))
        with pytest.raises(RuntimeError, match=r"expected input\[1, 4, 9, 9\] to have 3 channels"):
            F.conv2d(x.to("vdev"), w.to("vdev")[:, :1].repeat(1, 3, 1, 1), groups=1)
        with pytest.raises(
            RuntimeError, match="Kernel size can't be greater than actual input size"
        ):
            F.conv2d(x[:, :, :2, :2].to("vdev"), w.to("vdev"), groups=2)


def test_output_metadata_follows_every_argument_also_when_cached():
    # The executor caches meta-kernel results by signature; the second round is served from it.
    cpu = torch.arange(12.0).reshape(3, 4)
    x = cpu.to("vdev")
    cases = [
        lambda t, d: t.sum(0),
        lambda t, d: t.sum(1),
        lambda t, d: t.sum(1, keepdim=True),
        lambda t, d: t.t() + 1,  # output keeps the input's (transposed) layout
        lambda t, d: torch.arange(5, device=d),
        lambda t, d: torch.arange(7, device=d),
        lambda t, d: torch.arange(0.0, 1.0, 0.25, device=d),
        lambda t, d: torch.arange(0.0, 1.0, 0.2499999, device=d),  # differs in the last bits
        lambda t, d: t.to(torch.int64) * 2,
        lambda t, d: torch.cat([t, t], 0),
        lambda t, d: torch.cat([t, t], 1),
    ]
    for _ in range(2):
        for case in cases:
            got, ref = case(x, "vdev"), case(cpu, "cpu")
            assert (
                got.shape == ref.shape and got.stride() == ref.stride() and got.dtype == ref.dtype
            )
            torch.testing.assert_close(got.cpu(), ref)


# Index tensors are made before the gate: torch.tensor(..., device=...) is a blocking host-to-device
# copy, which waits for the stream (as on CUDA).
INDICES = {"cols": [4, 0, 2], "rows": [[0], [1], [2], [3]], "emb": [3, 0, 3]}
ASYNC_OPS = {
    "add": lambda a, b, c, ix: a + c,
    "mul_scalar": lambda a, b, c, ix: a * 3.5,
    "div": lambda a, b, c, ix: a / (c.abs() + 1),
    "exp": lambda a, b, c, ix: a.exp(),
    "sigmoid": lambda a, b, c, ix: torch.sigmoid(a),
    "where": lambda a, b, c, ix: torch.where(a > 0, a, c),
    "clamp": lambda a, b, c, ix: a.clamp(-0.5, 0.5),
    "pow": lambda a, b, c, ix: a.abs().pow(1.5),
    "mm": lambda a, b, c, ix: a @ b,
    "addmm": lambda a, b, c, ix: torch.addmm(c[:, :3], a, b),
    "sum_dim": lambda a, b, c, ix: a.sum(1),
    "mean": lambda a, b, c, ix: a.mean(),
    "softmax": lambda a, b, c, ix: torch.softmax(a, 1),
    "log_softmax": lambda a, b, c, ix: torch.log_softmax(a, 0),
    "cumsum": lambda a, b, c, ix: a.cumsum(1),
    "argmax": lambda a, b, c, ix: a.argmax(1),
    "cat": lambda a, b, c, ix: torch.cat([a, c], 0),
    "stack": lambda a, b, c, ix: torch.stack([a, c]),
    "index_select": lambda a, b, c, ix: a.index_select(1, ix["cols"]),
    "gather": lambda a, b, c, ix: a.gather(1, ix["rows"]),
    "contiguous_t": lambda a, b, c, ix: a.t().contiguous(),
    "flip": lambda a, b, c, ix: a.flip(0),
    "roll": lambda a, b, c, ix: a.roll(2, 1),
    "linear": lambda a, b, c, ix: torch.nn.functional.linear(a, b.t()),
    "gelu": lambda a, b, c, ix: torch.nn.functional.gelu(a),
    # relu runs as clamp_min.out(self, 0), CPU's own definition of relu (out_variants.h), in every
    # layout.
    "relu": lambda a, b, c, ix: torch.relu(a - 0.5),
    "relu_transposed": lambda a, b, c, ix: torch.relu(a.t()),
    "relu_expanded": lambda a, b, c, ix: torch.relu(a[:1].expand(3, 5)),
    "relu_strided": lambda a, b, c, ix: torch.relu(a[::2, ::2]),
    "layer_norm": lambda a, b, c, ix: torch.nn.functional.layer_norm(a, (5,)),
    "batch_norm_train": lambda a, b, c, ix: torch.nn.functional.batch_norm(
        a, None, None, training=True
    ),
    "conv2d": lambda a, b, c, ix: torch.nn.functional.conv2d(
        a.view(1, 1, 4, 5), c[:2, :3].reshape(1, 1, 2, 3)
    ),
    # Grouped: the argument check's first round has a convolution's own stand-ins
    # (checks/conv_stand_ins.h).
    "conv2d_grouped": lambda a, b, c, ix: torch.nn.functional.conv2d(
        a.view(1, 4, 5, 1), c[:, :2].reshape(4, 2, 1, 1), groups=2
    ),
    "conv_transpose2d": lambda a, b, c, ix: torch.nn.functional.conv_transpose2d(
        a.view(1, 1, 4, 5), c[:2, :3].reshape(1, 1, 2, 3), stride=2
    ),
    "conv2d_backward_weight": lambda a, b, c, ix: torch.ops.aten.convolution_backward(
        c[:3, :4].reshape(1, 1, 3, 4),
        a.view(1, 1, 4, 5),
        a[:2, :2].reshape(1, 1, 2, 2),
        [1],
        [1, 1],
        [0, 0],
        [1, 1],
        False,
        [0, 0],
        1,
        [True, True, True],
    )[1],
    # at::_convolution called itself (TorchScript traces record it) reaches
    # convolution_overrideable.
    "_convolution": lambda a, b, c, ix: torch._convolution(
        a.view(1, 1, 4, 5),
        c[:2, :3].reshape(1, 1, 2, 3),
        None,
        [1, 1],
        [1, 1],
        [1, 1],
        False,
        [0, 0],
        1,
        False,
        False,
        True,
        True,
    ),
    "max_pool2d": lambda a, b, c, ix: torch.nn.functional.max_pool2d(a.view(1, 1, 4, 5), 2),
    "embedding": lambda a, b, c, ix: torch.nn.functional.embedding(ix["emb"], a),
    "mse_loss": lambda a, b, c, ix: torch.nn.functional.mse_loss(a, c),
}


@pytest.mark.parametrize("name", sorted(ASYNC_OPS))
def test_each_kind_of_operator_is_queued_behind_a_closed_gate(name):
    op = ASYNC_OPS[name]
    g = torch.Generator().manual_seed(0)
    a, b, c = (
        torch.randn(4, 5, generator=g),
        torch.randn(5, 3, generator=g),
        torch.randn(4, 5, generator=g),
    )
    ix = {k: torch.tensor(v) for k, v in INDICES.items()}
    expected = op(a, b, c, ix)
    va, vb, vc = a.to("vdev"), b.to("vdev"), c.to("vdev")
    vix = {k: t.to("vdev") for k, t in ix.items()}
    s = torch.vdev.current_stream()
    s.synchronize()
    with gated(s) as gate:
        # Safety valve, not a timing assumption: an operator that wrongly synchronizes would wait
        # for this gate forever; the valve opens it so the assertion below reports the failure.
        valve = threading.Timer(60, gate.open)
        valve.start()
        try:
            result = op(va, vb, vc, vix)
            assert not gate.is_open(), f"{name} waited for the stream instead of being queued"
            assert result.device.type == "vdev"
        finally:
            valve.cancel()
    torch.testing.assert_close(result.cpu(), expected)


def test_a_large_grouped_convolution_is_queued_at_its_first_call():
    # Too large for stand-ins of the real sizes (2^24 elements in all), and refused by small ones
    # (64 channels in 64 groups become 3): only a convolution's own stand-ins (one channel per
    # group) check it without running it on the host, which would wait for the gate.
    x = torch.zeros(1, 64, 512, 512, device="vdev")
    w = torch.ones(64, 1, 3, 3, device="vdev")
    s = torch.vdev.current_stream()
    s.synchronize()
    with gated(s) as gate:
        valve = threading.Timer(60, gate.open)  # safety valve, as above
        valve.start()
        try:
            y = torch.nn.functional.conv2d(x, w, padding=1, groups=64)
            assert not gate.is_open(), "the first call waited for the stream"
        finally:
            valve.cancel()
    assert y.shape == (1, 64, 512, 512)
    assert torch.count_nonzero(y).item() == 0


def test_a_reducing_loss_prints_no_resize_warning():
    # These losses' out= kernels, given a reduction, resize their output; vdev must not make
    # PyTorch warn about resizing an output that has elements (CPU's functional call prints
    # nothing). Every loss found printing it in a sweep of torch.nn.functional's losses.
    r = run_python(
        """
        import torch
        import torch.nn.functional as F
        x = torch.rand(16, 1, device="vdev", requires_grad=True)
        y = torch.rand(16, 1, device="vdev")
        for loss in (F.mse_loss, F.smooth_l1_loss, F.huber_loss, F.binary_cross_entropy):
            for reduction in ("mean", "sum"):
                loss(x, y, reduction=reduction).backward()
        torch.vdev.synchronize()
        print("ok")
        """
    )
    assert r.stdout.strip() == "ok", r.stderr
    assert "resized" not in r.stderr, r.stderr
