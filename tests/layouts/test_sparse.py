"""Sparse COO and compressed (CSR, CSC, BSR, BSC) tensors on vdev, checked against CPU.

Every result is compared with the same call on CPU tensors. What CUDA queues is queued (checked
with the sync debug mode in "error" mode and with a gated stream); what synchronizes on CUDA
(output sizes that depend on values) is reported by the sync debug mode.
"""

import pytest
import torch
from asyncutil import gated, run_bounded, sync_warnings, wait_until_blocked
from hypothesis import given
from hypothesis import strategies as st

DEV = "vdev"

pytestmark = pytest.mark.filterwarnings("ignore:Sparse (CSR tensor support|invariant checks)")


@pytest.fixture(autouse=True)
def default_sync_mode_after():
    yield
    torch.vdev.set_sync_debug_mode(0)


def coo(seed=0, shape=(5, 7), nnz=9, dtype=torch.float64, dense_dims=(), coalesced=False):
    """A random CPU COO tensor, uncoalesced unless asked (duplicate indices included)."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.stack([torch.randint(0, s, (nnz,), generator=g) for s in shape])
    vals = torch.randn((nnz, *dense_dims), generator=g, dtype=torch.float64).to(dtype)
    t = torch.sparse_coo_tensor(idx, vals, (*shape, *dense_dims))
    return t.coalesce() if coalesced else t


def dense(seed, *shape, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def same(vdev_result, cpu_result, exact=False):
    """Same layout, dtype, sizes and (densified) values; the result lives on vdev."""
    assert vdev_result.device.type == DEV
    assert vdev_result.layout == cpu_result.layout
    assert vdev_result.dtype == cpu_result.dtype
    assert vdev_result.shape == cpu_result.shape
    got, want = vdev_result.cpu(), cpu_result
    if got.layout != torch.strided:
        got, want = got.to_dense(), want.to_dense()
    if exact:
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want)


# ---- COO: creation, members, copies ----


def test_coo_created_on_vdev_keeps_indices_values_and_flags():
    s = coo()
    x = torch.sparse_coo_tensor(s._indices(), s._values(), s.shape, device=DEV)
    assert x.is_sparse and x.device == torch.device("vdev:0")
    assert x._indices().device.type == DEV and x._values().device.type == DEV
    assert torch.equal(x._indices().cpu(), s._indices())
    assert torch.equal(x._values().cpu(), s._values())
    assert (x.sparse_dim(), x.dense_dim(), x._nnz(), x.is_coalesced()) == (2, 0, 9, False)
    c = x.coalesce()
    want = s.coalesce()
    assert c.is_coalesced() and c.device.type == DEV
    assert torch.equal(c.indices().cpu(), want.indices())
    assert torch.equal(c.values().cpu(), want.values())


def test_values_is_a_view_of_the_device_tensor():
    x = coo(coalesced=True).to(DEV)
    x.values().mul_(2)  # in place through the view
    assert torch.equal(x.values().cpu(), coo(coalesced=True).values() * 2)


def test_dense_to_sparse_on_vdev_matches_cpu():
    d = dense(1, 4, 5, 3)
    d[d.abs() < 0.8] = 0
    x = d.to(DEV)
    same(x.to_sparse(), d.to_sparse(), exact=True)
    same(x.to_sparse(sparse_dim=2), d.to_sparse(sparse_dim=2), exact=True)
    assert x.to_sparse(sparse_dim=2).dense_dim() == 1


@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    dense_dims=st.lists(st.integers(1, 3), min_size=0, max_size=1),
    nnz=st.integers(0, 12),
    dtype=st.sampled_from(
        [torch.float32, torch.float64, torch.int64, torch.complex64, torch.float16, torch.bool]
    ),
    coalesced=st.booleans(),
)
def test_copies_between_cpu_and_devices_lose_nothing(shape, dense_dims, nnz, dtype, coalesced):
    s = coo(0, tuple(shape), nnz, dtype, tuple(dense_dims), coalesced)
    for path in (["vdev:0"], ["vdev:1"], ["vdev:0", "vdev:1"], ["vdev:1", "vdev:0"]):
        t = s
        for device in path:
            t = t.to(device)
            assert t.device == torch.device(device) and t._values().device == torch.device(device)
        back = t.cpu()
        assert back.is_coalesced() == s.is_coalesced()
        assert torch.equal(back._indices(), s._indices())
        assert torch.equal(back._values(), s._values())
        assert back.shape == s.shape and back.dtype == s.dtype


def test_copy_into_a_vdev_sparse_tensor_from_cpu():
    s = coo(3)
    x = coo(4, nnz=2).to(DEV)
    x.copy_(s)
    assert x.device.type == DEV and x._values().device.type == DEV
    same(x, s, exact=True)


# ---- COO: element-wise operators, reductions, products ----

UNARY = ["neg", "abs", "sin", "tanh", "sqrt", "expm1", "floor", "sign", "relu", "sgn"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_operators_match_cpu(name):
    s = coo(5).abs() if name == "sqrt" else coo(5)
    same(getattr(torch, name)(s.to(DEV)), getattr(torch, name)(s))


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: a - b,
        lambda a, b: a * b,
        lambda a, b: a * 2.5,
        lambda a, b: a / 4,
        lambda a, b: a.pow(2),
        lambda a, b: torch.add(a, b, alpha=3),
        lambda a, b: a.t(),
        lambda a, b: a.unsqueeze(1),
        lambda a, b: torch.cat([a, b]),
        lambda a, b: a.index_select(1, torch.tensor([0, 3, 3, 6], device=a.device)),
        lambda a, b: a.narrow_copy(1, 2, 4),
        lambda a, b: a.sparse_mask(b.coalesce()),
        lambda a, b: torch.sparse.softmax(a, 1),
        lambda a, b: torch.sparse.log_softmax(a, 0),
        lambda a, b: torch.sparse.sum(a),
        lambda a, b: torch.sparse.sum(a, dim=1),
        lambda a, b: a.sum(),
        lambda a, b: a.to_dense(),
        lambda a, b: a.coalesce(),
    ],
    ids=lambda f: f.__code__.co_positions().__next__() and "",
)
def test_binary_operators_and_reductions_match_cpu(fn):
    a, b = coo(6), coo(7)
    same(fn(a.to(DEV), b.to(DEV)), fn(a, b))


def test_in_place_operators_match_cpu():
    a, b = coo(8), coo(9)
    x, y = a.to(DEV), b.to(DEV)
    for op in (lambda p, q: p.add_(q), lambda p, q: p.mul_(3), lambda p, q: p.sub_(q, alpha=2)):
        op(x, y)
        op(a, b)
        same(x, a)
    x.zero_()
    a.zero_()
    same(x, a, exact=True)


def test_dense_plus_sparse_matches_cpu():
    d, s = dense(10, 5, 7), coo(11)
    same(d.to(DEV) + s.to(DEV), d + s)
    dv = d.to(DEV)
    dv.add_(s.to(DEV), alpha=-0.5)
    same(dv, d.add(s, alpha=-0.5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128, torch.int64])
def test_sparse_dense_products_match_cpu(dtype):
    s = coo(12, dtype=dtype)
    m = dense(13, 7, 3).to(dtype)
    c = dense(14, 5, 3).to(dtype)
    sv, mv, cv = s.to(DEV), m.to(DEV), c.to(DEV)
    same(torch.mm(sv, mv), torch.mm(s, m))
    same(sv @ mv, s @ m)
    same(torch.sparse.mm(sv, mv), torch.sparse.mm(s, m))
    same(torch.addmm(cv, sv, mv, beta=0.5, alpha=2), torch.addmm(c, s, m, beta=0.5, alpha=2))
    same(torch.addmm(cv[0], sv, mv), torch.addmm(c[0], s, m))  # broadcast self
    same(cv.clone().addmm_(sv, mv), c.clone().addmm_(s, m))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.addmm(cv, sv, mv, out=out)
    same(out, torch.addmm(c, s, m))
    same(torch.mv(sv, mv[:, 0].contiguous()), torch.mv(s, m[:, 0].contiguous()))


def test_batched_and_sparse_sparse_products_match_cpu():
    b = torch.stack([coo(15), coo(16)])
    m = dense(17, 2, 7, 4)
    same(torch.bmm(b.to(DEV), m.to(DEV)), torch.bmm(b, m))
    s, t = coo(18), coo(19, shape=(7, 4))
    same(torch.sparse.mm(s.to(DEV), t.to(DEV)), torch.sparse.mm(s, t))
    same(torch.hspmm(s.to(DEV), dense(20, 7, 2).to(DEV)), torch.hspmm(s, dense(20, 7, 2)))
    c = coo(21, shape=(5, 2))
    same(
        torch.sspaddmm(c.to(DEV), s.to(DEV), dense(22, 7, 2).to(DEV)),
        torch.sspaddmm(c, s, dense(22, 7, 2)),
    )


def test_hybrid_tensors_match_cpu():
    s = coo(23, dense_dims=(3,))
    x = s.to(DEV)
    same(x.coalesce(), s.coalesce())
    same(x.to_dense(), s.to_dense())
    same(x * 2 + x, s * 2 + s)
    same(torch.sparse.sum(x, dim=0), torch.sparse.sum(s, dim=0))


def test_empty_sparse_tensors_match_cpu():
    s = coo(24, nnz=0)
    x = s.to(DEV)
    same(x.coalesce(), s.coalesce())
    same(x.to_dense(), s.to_dense(), exact=True)
    same(x @ dense(25, 7, 2).to(DEV), s @ dense(25, 7, 2))


# ---- autograd and training ----


def test_gradients_through_sparse_operators_match_cpu():
    s = coo(26)
    m = dense(27, 7, 3)
    grads = []
    for device in ("cpu", DEV):
        sv = s.to(device, copy=True).coalesce().requires_grad_()
        mv = m.to(device, copy=True).requires_grad_()
        out = torch.sparse.mm(sv, mv).sin().sum() + torch.sparse.sum(sv * sv).to_dense()
        out = out + sv.to_dense().pow(2).sum()
        out.backward()
        grads.append((sv.grad, mv.grad))
    (sg_cpu, mg_cpu), (sg_vdev, mg_vdev) = grads
    same(sg_vdev, sg_cpu)
    same(mg_vdev, mg_cpu)


@pytest.mark.parametrize("optimizer", ["SGD", "SparseAdam", "Adagrad"])
def test_sparse_embedding_training_matches_cpu(optimizer):
    weights = []
    for device in ("cpu", DEV):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(20, 4, sparse=True).to(device)
        opt = {
            "SGD": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.0),
            "SparseAdam": lambda p: torch.optim.SparseAdam(p, lr=0.05),
            "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
        }[optimizer](emb.parameters())
        g = torch.Generator().manual_seed(1)
        for _ in range(5):
            idx = torch.randint(0, 20, (6, 3), generator=g).to(device)
            loss = emb(idx).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            assert emb.weight.grad.is_sparse and emb.weight.grad.device.type == device
            opt.step()
        weights.append(emb.weight.detach())
    same(weights[1], weights[0])


def test_sparse_embedding_bag_gradient_is_sparse_and_trains_as_on_cpu():
    weights = []
    for device in ("cpu", DEV):
        torch.manual_seed(0)
        bag = torch.nn.EmbeddingBag(10, 3, mode="sum", sparse=True).to(device)
        opt = torch.optim.SGD(bag.parameters(), lr=0.1)
        idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9], device=device)
        offsets = torch.tensor([0, 4], device=device)
        for _ in range(3):
            opt.zero_grad()
            bag(idx, offsets).pow(2).sum().backward()
            assert bag.weight.grad.layout == torch.sparse_coo
            opt.step()
        weights.append(bag.weight.detach())
    same(weights[1], weights[0])


# ---- compressed layouts ----

LAYOUTS = {
    "csr": lambda d: d.to_sparse_csr(),
    "csc": lambda d: d.to_sparse_csc(),
    "bsr": lambda d: d.to_sparse_bsr((2, 2)),
    "bsc": lambda d: d.to_sparse_bsc((2, 2)),
}


def sparse_dense(seed, *shape):
    d = dense(seed, *shape)
    d[d.abs() < 0.7] = 0
    return d


@pytest.mark.parametrize("layout", LAYOUTS)
def test_compressed_conversions_and_members_match_cpu(layout):
    d = sparse_dense(30, 6, 4)
    want = LAYOUTS[layout](d)
    got = LAYOUTS[layout](d.to(DEV))  # made on the device from a dense device tensor
    same(got, want, exact=True)
    moved = want.to(DEV)
    same(moved, want, exact=True)
    compressed, plain = {
        "csr": ("crow_indices", "col_indices"),
        "bsr": ("crow_indices", "col_indices"),
        "csc": ("ccol_indices", "row_indices"),
        "bsc": ("ccol_indices", "row_indices"),
    }[layout]
    for member in (compressed, plain, "values"):
        m = getattr(moved, member)()
        assert m.device.type == DEV
        assert torch.equal(m.cpu(), getattr(want, member)())
    same(moved.to_dense(), d, exact=True)
    other = moved.to("vdev:1")
    assert other.values().device == torch.device("vdev:1")
    same(other, want, exact=True)


def test_compressed_products_and_element_wise_match_cpu():
    d = sparse_dense(31, 6, 4)
    m = dense(32, 4, 3)
    c = d.to_sparse_csr()
    cv, mv = c.to(DEV), m.to(DEV)
    same(cv @ mv, c @ m)
    same(torch.addmm(dense(33, 6, 3).to(DEV), cv, mv), torch.addmm(dense(33, 6, 3), c, m))
    same(cv @ mv[:, 0].contiguous(), c @ m[:, 0].contiguous())
    same(cv.sin(), c.sin())
    same(cv * 3, c * 3)
    same(cv + cv, c + c)
    same(dense(34, 6, 4).to(DEV) + cv, dense(34, 6, 4) + c)
    mask = sparse_dense(35, 6, 3).to_sparse_csr()
    a, b = dense(36, 6, 5), dense(37, 5, 3)
    same(
        torch.sparse.sampled_addmm(mask.to(DEV), a.to(DEV), b.to(DEV)),
        torch.sparse.sampled_addmm(mask, a, b),
    )
    bsr = d.to_sparse_bsr((2, 2))
    same(bsr.to(DEV) @ mv, bsr @ m)


def test_conversions_between_compressed_layouts_and_transposed_products_match_cpu():
    """These flatten COO indices through a DispatchStub vdev fills (ops/sparse_stubs.cpp)."""
    d = sparse_dense(60, 6, 4)
    m = dense(61, 4, 3)
    for fn in (
        lambda t: t.to_sparse_csr().to_sparse_csc(),
        lambda t: t.to_sparse_csc().to_sparse_csr(),
        lambda t: t.to_sparse_bsr((2, 2)).to_sparse_bsc((2, 2)),
        lambda t: t.to_sparse_csr().to_sparse_bsc((2, 2)),
    ):
        same(fn(d.to(DEV)), fn(d), exact=True)
    same(d.to_sparse_csc().to(DEV) @ m.to(DEV), d.to_sparse_csc() @ m)
    same(
        d.to_sparse_csr().to(DEV).t() @ dense(62, 6, 2).to(DEV),
        d.to_sparse_csr().t() @ dense(62, 6, 2),
    )
    same(
        d.to_sparse_csr().to(DEV) @ d.t().to_sparse_csr().to(DEV),
        d.to_sparse_csr() @ d.t().to_sparse_csr(),
    )
    grads = []
    for device in ("cpu", DEV):
        x = d.to_sparse_csr().to(device, copy=True).requires_grad_()
        w = m.to(device, copy=True).requires_grad_()
        (x @ w).sin().sum().backward()
        grads.append(w.grad)
    same(grads[1], grads[0])


def test_batched_compressed_tensors_match_cpu():
    base = sparse_dense(38, 4, 4)
    d = torch.stack([base, base * 3])  # one sparsity pattern: CPU requires the same nnz per batch
    for layout in ("csr", "bsr"):
        want = LAYOUTS[layout](d)
        same(LAYOUTS[layout](d.to(DEV)), want, exact=True)
        same(want.to(DEV).to_dense(), d, exact=True)


# ---- asynchrony, device rules, memory ----


def test_products_and_to_dense_are_queued_as_on_cuda():
    s, m, c = coo(40), dense(41, 7, 3), dense(42, 5, 3)
    sv, mv, cv = s.to(DEV), m.to(DEV), c.to(DEV)
    csr = sparse_dense(43, 5, 7).to_sparse_csr().to(DEV)
    ones = torch.ones(5, 7, dtype=torch.float64, device=DEV)
    vec = torch.ones(7, dtype=torch.float64, device=DEV)
    two = torch.tensor(2.0, dtype=torch.float64, device=DEV)
    torch.vdev.synchronize()
    torch.vdev.set_sync_debug_mode("error")
    results = [
        sv.to_dense(),
        sv @ mv,
        torch.addmm(cv, sv, mv),
        ones + sv,
        csr @ mv,
        csr @ vec,
        csr.to_dense(),
        sv * 2,
        sv * two,
    ]
    torch.vdev.set_sync_debug_mode(0)
    same(results[1], s @ m)
    same(results[3], torch.ones(5, 7, dtype=torch.float64) + s)
    same(results[7], s * 2, exact=True)
    assert results[7].is_coalesced() == s.is_coalesced()
    same(results[8], s * 2, exact=True)


def test_a_product_returns_while_the_stream_is_blocked():
    s, m = coo(44), dense(45, 7, 3)
    sv, mv = s.to(DEV), m.to(DEV)
    torch.vdev.synchronize()
    result = []
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        assert run_bounded(lambda: result.append(torch.addmm(torch.zeros_like(mv[:5]), sv, mv)))
    same(result[0], s @ m)


def test_value_dependent_sizes_synchronize_and_are_reported():
    x = coo(46).to(DEV)
    d = dense(47, 3, 3).to(DEV)
    torch.vdev.synchronize()
    assert sync_warnings(lambda: x.coalesce()) == ["aten::_coalesce"]
    # CUDA's dense_to_sparse (shared with CPU) synchronizes in nonzero.
    assert sync_warnings(lambda: d.to_sparse()) == ["aten::nonzero"]
    assert sync_warnings(lambda: x.to_dense()) == []


def test_mixing_devices_is_refused_as_on_cuda():
    s, m = coo(48), dense(49, 7, 3)
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(s.to(DEV), m)
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(s.to("vdev:0"), m.to("vdev:1"))
    with pytest.raises(RuntimeError, match="same device"):
        s.to("vdev:0") + s.to("vdev:1")


def test_a_factory_given_members_on_two_devices_refuses_them_as_cuda_does():
    with pytest.raises(RuntimeError, match="same device.*values is on vdev:1"):
        torch.sparse_coo_tensor(
            torch.tensor([[0], [1]], device="vdev:0"), torch.tensor([1.0], device="vdev:1"), (2, 3)
        )


def test_host_runs_and_products_are_clean_under_poison_and_init():
    """A host run's result grown into a fresh block is written after the block's poison fill, and
    is known to be written; mv (addmv with beta 0) does not read its uninitialised self."""
    from child_process import run_python

    code = """
        import torch, torch_vdev, warnings
        warnings.simplefilter("ignore")
        a = torch.tensor([[0., 2, 0], [1, 0, 3]])
        csr = a.to("vdev").to_sparse_csr()
        for _ in range(3):
            print((torch.ones(4, 2, device="vdev") @ csr).cpu()[0].tolist())
            print((csr @ torch.ones(3, device="vdev")).cpu().tolist())
        """
    for tools in ("poison", "init"):
        r = run_python(code, env={"VDEV_SANITIZER": tools})
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["[1.0,", "2.0,", "3.0]", "[2.0,", "4.0]"] * 3, r.stdout


def test_results_of_a_second_device_stay_there():
    s, m = coo(50), dense(51, 7, 3)
    x = s.to("vdev:1")
    for r in (x.coalesce(), x @ m.to("vdev:1"), x.to_dense(), x * 2, torch.sparse.sum(x, 0)):
        assert r.device == torch.device("vdev:1")


def test_sparse_memory_is_counted_by_the_allocator():
    torch.vdev.synchronize()
    before = torch.vdev.memory_allocated()
    x = coo(52, shape=(1000, 1000), nnz=4096).to(DEV)
    members = x._indices().nbytes + x._values().nbytes
    assert torch.vdev.memory_allocated() - before >= members
    del x
    torch.vdev.synchronize()
    assert torch.vdev.memory_allocated() == before


def test_an_operator_cuda_lacks_raises_not_implemented_naming_it():
    c = sparse_dense(53, 4, 4).to_sparse_csr().to(DEV)
    # _sparse_mm_reduce_impl has a SparseCsrCPU kernel only (native_functions.yaml).
    with pytest.raises(
        NotImplementedError, match=r"_sparse_mm_reduce_impl.*vdev.*only CPU has one"
    ):
        torch.sparse.mm(c, dense(54, 4, 2).to(DEV), "sum")


def test_cpu_errors_for_bad_sparse_input_come_at_the_call():
    s = coo(55)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.mm(s, dense(56, 6, 3))
    with pytest.raises(type(cpu_error.value), match="size|shape|match"):
        torch.mm(s.to(DEV), dense(56, 6, 3).to(DEV))
    with pytest.raises(RuntimeError):
        torch.sparse_coo_tensor(
            torch.tensor([[0, 9]]), torch.ones(2), (3,), device=DEV, check_invariants=True
        )


# ---- the stream sanitizer sees sparse tensors' members ----


def test_a_sparse_product_on_another_stream_without_a_wait_is_a_race():
    from torch.vdev.sanitizer import StreamRaceError

    s, m = coo(57), dense(58, 7, 3)
    torch.vdev.synchronize()
    with torch.vdev.sanitizer.sanitize("streams"):
        x, md = s.coalesce().to(DEV), m.to(DEV)  # (blocking copies: the host waits)
        x.values().mul_(1)  # its values written on the default stream, queued
        side = torch.vdev.Stream()
        with torch.vdev.stream(side), pytest.raises(StreamRaceError, match="data race: aten::"):
            torch.mm(x, md)  # queued on the side stream: reads x's values unordered
        side.wait_stream(torch.vdev.default_stream())
        with torch.vdev.stream(side):
            r = torch.mm(x, md)  # ordered now: no report
            c = x.coalesce()  # host run after the wait: no report
        torch.vdev.synchronize()
    torch.vdev.sanitizer.clear_findings()
    same(r, s.coalesce() @ m)
    same(c, s.coalesce())
