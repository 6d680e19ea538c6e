"""First tensors: creation, copies that keep every byte, metadata and view ops, the CPU fallback."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch_vdev import _testing as rt

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
    torch.complex128,
]


def random_cpu_tensor(shape, dtype, seed):
    """Arbitrary bit patterns (NaNs and all): a copy must preserve bytes, not just values."""
    g = torch.Generator().manual_seed(seed)
    numel = int(torch.Size(shape).numel())
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    nbytes = numel * torch.empty(0, dtype=dtype).element_size()
    raw = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g)
    if dtype == torch.bool:
        raw = raw % 2
    return raw.view(dtype).reshape(shape)


def same_bytes(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True

    def raw(t):  # fresh standard strides (size-1 dims too), then reinterpret as bytes
        return t.new_empty(t.shape).copy_(t).reshape(-1).view(torch.uint8)

    return torch.equal(raw(a), raw(b))


@st.composite
def strided_case(draw):
    """A shape, a dtype and a strided view into a larger buffer (transposes, steps, offsets)."""
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    dtype = draw(st.sampled_from(DTYPES))
    steps = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    perm = draw(st.permutations(range(ndim)))
    offset = draw(st.integers(0, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    return shape, dtype, steps, tuple(perm), offset, seed


def make_view(shape, steps, perm, offset, make):
    """A view of `shape` into a buffer made by `make(flat_shape)`: offset, permuted, stepped."""
    big = tuple(s * k for s, k in zip(shape, steps, strict=True))
    big_perm = tuple(big[p] for p in perm)
    numel = int(torch.Size(big_perm).numel())
    flat = make((offset + max(1, numel),))
    base = flat[offset : offset + numel].reshape(big_perm) if big_perm else flat[offset]
    inv = [perm.index(i) for i in range(len(perm))]
    view = base.permute(inv) if perm else base
    return view[tuple(slice(None, None, k) for k in steps)]


# (source, destination, non_blocking); "pinned" is CPU memory from the pinned host allocator.
COPY_CASES = [
    ("cpu", "vdev:0", False),
    ("vdev:0", "cpu", False),
    ("vdev:0", "vdev:0", False),
    ("vdev:0", "vdev:1", False),
    ("cpu", "vdev:0", True),
    ("pinned", "vdev:0", True),
    ("pinned", "vdev:1", False),
    ("vdev:0", "pinned", True),
    ("vdev:1", "pinned", False),
    ("vdev:0", "vdev:1", True),
]


def zeros_on(kind, shape, dtype):
    if kind == "pinned":
        t = torch.zeros(shape, dtype=dtype).pin_memory()
        assert t.is_pinned()
        return t
    return torch.zeros(shape, dtype=dtype, device=kind)


@pytest.mark.parametrize("src_dev,dst_dev,non_blocking", COPY_CASES)
@given(case=strided_case())
def test_copy_keeps_every_byte_for_any_shape_stride_dtype(src_dev, dst_dev, non_blocking, case):
    shape, dtype, steps, perm, offset, seed = case
    src_cpu = random_cpu_tensor(shape, dtype, seed)
    # Strided source: a view into a bigger buffer on the source device.
    src = make_view(shape, steps, perm, offset, lambda s: zeros_on(src_dev, s, dtype))
    src.copy_(src_cpu)  # itself a copy into a strided destination when src_dev is vdev
    dst = make_view(
        shape,
        steps[::-1] if steps else steps,
        perm,
        offset + 1,
        lambda s: zeros_on(dst_dev, s, dtype),
    )
    dst.copy_(src, non_blocking=non_blocking)
    if non_blocking:
        torch.vdev.synchronize(0)  # a non_blocking copy into host memory is read after a sync
        torch.vdev.synchronize(1)
    assert dst.device == torch.device("cpu" if dst_dev == "pinned" else dst_dev)
    assert same_bytes(dst.cpu(), src_cpu)
    assert same_bytes(src.to("cpu"), src_cpu)


@pytest.mark.parametrize("dev", ["vdev:0", "vdev:1"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_to_device_and_back_is_bit_exact(dev, dtype):
    x = random_cpu_tensor((7, 13), dtype, seed=3)
    v = x.to(dev)
    assert v.device == torch.device(dev) and v.dtype == dtype
    assert same_bytes(v.cpu(), x)
    assert same_bytes(v.to("vdev:1" if dev == "vdev:0" else "vdev:0").cpu(), x)


@pytest.mark.parametrize("nbytes", [(2 << 20) - 1, 2 << 20, (5 << 20) + 3])
@pytest.mark.parametrize("non_blocking", [False, True])
def test_large_copies_run_as_cpus_copy_and_keep_every_byte(nbytes, non_blocking):
    # From 2 MiB on, a synchronous copy between host and device runs as CPU's copy_ (split among
    # the intra-op threads), below as one memcpy: both keep every byte, in both directions, also
    # into a device view at an offset.
    g = torch.Generator().manual_seed(nbytes)
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g)
    dev = torch.zeros(nbytes + 5, dtype=torch.uint8, device="vdev")
    dev[5:].copy_(src, non_blocking=non_blocking)
    back = torch.empty(nbytes, dtype=torch.uint8)
    back.copy_(dev[5:], non_blocking=non_blocking)
    assert torch.equal(back, src)
    assert dev[:5].cpu().tolist() == [0] * 5


def test_copy_converts_dtype_and_broadcasts_like_cpu():
    src = torch.arange(3, dtype=torch.int32)
    dst = torch.zeros(2, 3, dtype=torch.float64, device="vdev:1")
    dst.copy_(src.to("vdev:0"))
    assert torch.equal(dst.cpu(), src.to(torch.float64).expand(2, 3))
    out = torch.empty(2, 3, dtype=torch.float16)
    out.copy_(dst)
    assert torch.equal(out, src.to(torch.float16).expand(2, 3))


def test_factories_on_each_device_leave_current_device_alone(device_count):
    for i in range(device_count):
        dev = torch.device("vdev", i)
        for t in (
            torch.empty(3, device=dev),
            torch.empty_strided((2, 3), (1, 2), device=dev),
            torch.zeros(2, 2, device=dev),
            torch.ones(4, dtype=torch.int64, device=dev),
            torch.full((2,), 7.0, device=dev),
            torch.arange(6.0, device=dev),
            torch.eye(3, device=dev),
            torch.randn(3, device=dev),
        ):
            assert t.device == dev
            assert rt.pointer_device(t.data_ptr()) == i or t.numel() == 0
        assert torch.vdev.current_device() == 0
    assert torch.empty_strided((2, 3), (1, 2), device="vdev").stride() == (1, 2)
    assert torch.empty(
        2,
        3,
        device="vdev",
        memory_format=torch.channels_last_3d if False else torch.contiguous_format,
    ).is_contiguous()


def test_factory_rejects_bad_options():
    with pytest.raises(IndexError, match="device index 5 out of range"):
        torch.zeros(1, device="vdev:5")
    with pytest.raises(RuntimeError, match="only CPU tensors can be pinned"):
        torch.empty(2, device="vdev", pin_memory=True)


def test_fill_zero_and_item():
    x = torch.empty(5, device="vdev:1")
    x.fill_(2.5)
    assert x.cpu().tolist() == [2.5] * 5
    x[1:3].zero_()
    assert x.cpu().tolist() == [2.5, 0, 0, 2.5, 2.5]
    assert torch.tensor([42], dtype=torch.int64, device="vdev:1").item() == 42
    assert torch.tensor(True, device="vdev").item() is True
    assert torch.tensor(1 + 2j, device="vdev").item() == 1 + 2j


def test_views_share_storage_and_see_writes():
    base = torch.zeros(4, 6, device="vdev:1")
    views = [
        base.view(24),
        base.t(),
        base[1:3, ::2],
        base.unsqueeze(0),
        base.as_strided((2, 2), (6, 1), 1),
        base.reshape(6, 4),
        base.unfold(1, 2, 2),
        base.expand(2, 4, 6),
        base.narrow(0, 1, 2),
        base.select(1, 3),
        base.diagonal(),
        base.view(torch.int32),
    ]
    for v in views:
        assert v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
        assert v.device == base.device
    base.view(-1)[7] = 5.0  # base[1, 1]
    assert base.t()[1, 1].item() == 5.0
    assert base[1:3, ::2][0, 0].item() == 0.0 and base[1:3, 1::2][0, 0].item() == 5.0
    c = torch.zeros(3, dtype=torch.complex64, device="vdev")
    torch.view_as_real(c)[1, 1] = 3.0
    assert c[1].item() == 3j
    assert torch.view_as_complex(torch.view_as_real(c)).data_ptr() == c.data_ptr()


def test_resize_grows_on_the_tensors_own_device_and_keeps_data():
    x = torch.arange(4.0, device="vdev:1")
    x.resize_(2, 5)
    assert x.shape == (2, 5) and x.device == torch.device("vdev:1")
    assert rt.pointer_device(x.data_ptr()) == 1
    assert x.flatten()[:4].cpu().tolist() == [0, 1, 2, 3]
    x.resize_(3)
    assert x.cpu().tolist() == [0, 1, 2]
    x.resize_(2, 2, memory_format=torch.contiguous_format)
    assert x.is_contiguous()
    s = torch.ones(2, device="vdev:1").untyped_storage()
    s.resize_(64)
    assert s.nbytes() == 64 and rt.pointer_device(s.data_ptr()) == 1
    assert torch.vdev.current_device() == 0


def test_out_variant_resizes_on_output_device():
    out = torch.empty(0, device="vdev:1")
    torch.add(torch.ones(3, device="vdev:1"), 1, out=out)
    assert out.cpu().tolist() == [2, 2, 2]
    assert rt.pointer_device(out.data_ptr()) == 1


def test_set_variants():
    src = torch.arange(6.0, device="vdev:1")
    t = torch.empty(0, device="vdev:1")
    t.set_(src)
    assert t.data_ptr() == src.data_ptr() and t.cpu().tolist() == list(range(6))
    t.set_(src.untyped_storage(), 2, (2, 2), (1, 2))
    assert t.cpu().tolist() == [[2, 4], [3, 5]]
    t.set_(src.untyped_storage())
    assert t.shape == (6,)
    t.set_()
    assert t.numel() == 0 and t.device == torch.device("vdev:1")
    with pytest.raises(RuntimeError, match="devices must match"):
        t.set_(torch.arange(2.0, device="vdev:0"))


OPS = [
    ("add", lambda a, b: a + b * 2),
    ("mul_div", lambda a, b: (a * b) / (b.abs() + 1)),
    ("matmul", lambda a, b: a @ b.T),
    ("sum_dim", lambda a, b: a.sum(1)),
    ("mean_std", lambda a, b: torch.stack([a.mean(0), b.std(0)])),
    ("max", lambda a, b: a.max(dim=1).values),
    ("argmax", lambda a, b: b.argmax(0)),
    ("softmax", lambda a, b: torch.softmax(a, -1)),
    ("cumsum", lambda a, b: a.cumsum(0)),
    ("index", lambda a, b: a[torch.tensor([2, 0], device=a.device)]),
    ("bool_mask", lambda a, b: a[a > 0]),
    ("nonzero", lambda a, b: (a > 0).nonzero()),
    ("where", lambda a, b: torch.where(a > b, a, b)),
    ("cat", lambda a, b: torch.cat([a, b], 1)),
    ("sort", lambda a, b: a.sort(1).values),
    ("topk", lambda a, b: b.topk(2, 1).indices),
    ("scatter", lambda a, b: torch.zeros_like(a).scatter_(1, b.abs().argsort(1), a)),
    ("inplace", lambda a, b: a.clone().mul_(3).add_(b)),
    ("setitem", lambda a, b: a.clone().index_put_((torch.tensor([1], device=a.device),), b[0])),
    ("einsum", lambda a, b: torch.einsum("ij,kj->ik", a, b)),
    ("linear", lambda a, b: torch.nn.functional.linear(a, b)),
    ("fft", lambda a, b: torch.fft.rfft(a).abs()),
]


@pytest.mark.parametrize("dev", ["vdev:0", "vdev:1"])
@pytest.mark.parametrize("name,fn", OPS, ids=[n for n, _ in OPS])
def test_fallback_ops_match_cpu(dev, name, fn):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g)
    expected = fn(a, b)
    got = fn(a.to(dev), b.to(dev))
    assert got.device == torch.device(dev)
    torch.testing.assert_close(got.cpu(), expected)
    assert torch.vdev.current_device() == 0


def test_printing_matches_cpu_apart_from_device():
    x = torch.tensor([[1.5, -2.0], [3.25, 1e-8]])
    assert repr(x.to("vdev:1")) == repr(x)[:-1] + ", device='vdev:1')"


def test_autograd_matches_cpu():
    g = torch.Generator().manual_seed(1)
    w_cpu = torch.randn(5, 3, generator=g, requires_grad=True)
    x_cpu = torch.randn(4, 5, generator=g)
    w = w_cpu.detach().to("vdev:1").requires_grad_()
    x = x_cpu.to("vdev:1")
    for weight, inp in ((w_cpu, x_cpu), (w, x)):
        loss = torch.tanh(inp @ weight).pow(2).mean()
        loss.backward()
    assert w.grad.device == torch.device("vdev:1")
    torch.testing.assert_close(w.grad.cpu(), w_cpu.grad)


def test_mixing_vdev_devices_is_an_error_as_on_cuda():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(2, device="vdev:0") + torch.ones(2, device="vdev:1")
    with pytest.raises(
        RuntimeError, match="tensors is on vdev:1, different from other tensors on vdev:0"
    ):
        torch.cat([torch.ones(2, device="vdev:0"), torch.ones(2, device="vdev:1")])


@pytest.mark.parametrize("direction", ["cpu->vdev", "vdev->vdev", "vdev->cpu", "vdev:0->vdev:1"])
@pytest.mark.parametrize(
    "dst_shape, src_shape",
    [((0,), (2,)), ((3,), (2,)), ((2, 0), (3, 0)), ((3,), (2, 3)), ((2, 3), (3,)), ((0, 2), (1,))],
)
def test_copy_broadcasts_and_refuses_as_cpus_copy_does_at_the_call(direction, dst_shape, src_shape):
    # Before: an empty destination returned at once, and vdev -> vdev copies of shapes that do not
    # broadcast were queued and failed at a later synchronize (or, for an empty one, never).
    src_dev, dst_dev = direction.replace("vdev->", "vdev:0->").split("->")
    src_dev = "vdev:0" if src_dev == "vdev" else src_dev

    def run(s_dev, d_dev):
        try:
            dst = torch.zeros(dst_shape, device=d_dev)
            dst.copy_(torch.arange(float(torch.Size(src_shape).numel())).view(src_shape).to(s_dev))
            return None, dst.cpu()
        except RuntimeError as e:
            return str(e), None

    want_error, want = run("cpu", "cpu")
    got_error, got = run(src_dev, dst_dev)
    assert got_error == want_error
    if want is not None:
        assert torch.equal(got, want)
    torch.vdev.synchronize()  # nothing was queued that fails later
