"""Accelerator graphs on vdev (torch.accelerator.Graph and torch.vdev's CUDA-style spellings):
capture records work instead of running it, replay re-runs it on the same addresses, private
memory pools, random numbers per replay, and capture errors that name the operation and leave the
device working."""

import threading

import pytest
import torch
from asyncutil import gated, wait_until_blocked
from hypothesis import given
from hypothesis import strategies as st


@pytest.fixture
def side():
    """A capture stream (a graph captures on a stream of its own, as on CUDA)."""
    return torch.vdev.Stream()


def capture(body, stream, **graph_kwargs):
    g = torch.accelerator.Graph(**graph_kwargs)
    with stream, g:
        out = body()
    return g, out


# ---- capture and replay ---------------------------------------------------------------------


def test_capture_records_work_and_replay_runs_it_on_the_same_memory(side):
    x = torch.arange(6.0, device="vdev")
    g, y = capture(lambda: x * 2 + 1, side)
    torch.vdev.synchronize()
    assert torch.equal(x.cpu(), torch.arange(6.0))  # nothing ran during capture
    g.replay()
    assert torch.equal(y.cpu(), torch.arange(6.0) * 2 + 1)
    x.copy_(torch.full((6,), 10.0))  # new input in the same memory
    g.replay()
    assert torch.equal(y.cpu(), torch.full((6,), 21.0))


def test_stream_is_capturing_only_during_capture(side):
    g = torch.accelerator.Graph()
    assert not side.is_capturing()
    with side, g:
        assert side.is_capturing()
        assert torch.vdev.is_current_stream_capturing()
        assert not torch.vdev.default_stream().is_capturing()  # only the capturing stream
    assert not side.is_capturing()
    assert not torch.vdev.is_current_stream_capturing()


def test_replay_returns_once_queued(side):
    x = torch.zeros(4, device="vdev")
    g, _ = capture(lambda: x.add_(1), side)
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        g.replay()  # returns behind the closed gate: asynchronous
        assert not torch.vdev.current_stream().query()
        gate.open()
    assert torch.equal(x.cpu(), torch.ones(4))


OPS = ["add_", "mul_", "sin_", "tmp_add", "tmp_mm", "addcmul_"]


def apply(op, state, k):
    """One operation of a program, on a list of two 8x8 tensors (vdev or CPU alike)."""
    a, b = state
    if op == "add_":
        a.add_(b, alpha=0.5)
    elif op == "mul_":
        b.mul_(0.9)
    elif op == "sin_":
        a.sin_()
    elif op == "tmp_add":  # a temporary, freed inside the capture
        t = a + b * k
        b.copy_(t / 4)
    elif op == "tmp_mm":
        a.copy_(torch.tanh(a @ b))
    elif op == "addcmul_":
        b.addcmul_(a, a, value=0.1)


@given(
    program=st.lists(st.tuples(st.sampled_from(OPS), st.integers(1, 3)), min_size=1, max_size=12),
    replays=st.integers(1, 3),
)
def test_replay_equals_running_the_program_again(program, replays):
    cpu = [torch.linspace(-1, 1, 64).reshape(8, 8), torch.linspace(0, 2, 64).reshape(8, 8)]
    dev = [t.to("vdev") for t in cpu]
    stream = torch.vdev.Stream()
    g = torch.accelerator.Graph()
    with stream, g:
        for op, k in program:
            apply(op, dev, k)
    for _ in range(replays):
        g.replay()
        for op, k in program:
            apply(op, cpu, k)
    for d, c in zip(dev, cpu, strict=True):
        torch.testing.assert_close(d.cpu(), c)


def test_side_streams_forked_and_joined_inside_the_capture(side):
    x = torch.ones(5, device="vdev")
    y = torch.zeros(5, device="vdev")
    g = torch.accelerator.Graph()
    other = torch.vdev.Stream()
    with side, g:
        other.wait_stream(side)  # fork
        with other:
            y.copy_(x * 3)
        x.add_(1)
        side.wait_stream(other)  # join
        z = x + y
    g.replay()
    assert torch.equal(z.cpu(), torch.full((5,), 5.0))
    assert not other.is_capturing()


def test_pinned_copies_are_captured_and_reread_at_replay(side):
    host = torch.zeros(4).pin_memory()
    out = torch.zeros(4).pin_memory()
    x = torch.zeros(4, device="vdev")

    def body():
        x.copy_(host, non_blocking=True)
        out.copy_(x * 2, non_blocking=True)

    g, _ = capture(body, side)
    host.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))  # read when the graph replays, not before
    g.replay()
    torch.vdev.synchronize()
    assert out.tolist() == [2.0, 4.0, 6.0, 8.0]


def test_reset_and_capture_again(side):
    x = torch.zeros(3, device="vdev")
    g, _ = capture(lambda: x.add_(1), side)
    g.reset()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    with side, g:
        x.add_(10)
    g.replay()
    assert x.tolist() == [10.0] * 3


def test_capture_twice_without_reset_is_an_error(side):
    g, _ = capture(lambda: torch.ones(2, device="vdev") + 1, side)
    with pytest.raises(RuntimeError, match="already holds a captured graph; call reset"):
        g.capture_begin()


def test_keep_graph_instantiate_and_debug_dump(side, tmp_path):
    x = torch.zeros(2, device="vdev")
    g, _ = capture(lambda: x.add_(1), side, keep_graph=True)
    g.instantiate()
    g.instantiate()  # keep_graph: instantiate again is allowed
    g.replay()
    path = tmp_path / "g.dot"
    g.debug_dump(str(path))
    assert "aten::add" in path.read_text()
    assert x.tolist() == [1.0, 1.0]

    plain, _ = capture(lambda: x.add_(1), side)  # keep_graph=False instantiates at capture_end
    with pytest.raises(RuntimeError, match="only when keep_graph=True"):
        plain.instantiate()
    with pytest.warns(UserWarning, match="debugging is not enabled"):
        plain.debug_dump(str(tmp_path / "no.dot"))


def test_replay_before_capture_and_pool_before_capture_are_errors():
    g = torch.accelerator.Graph()
    with pytest.raises(RuntimeError, match="replay\\(\\) called without a preceding"):
        g.replay()
    with pytest.raises(RuntimeError, match="pool\\(\\) called without a preceding"):
        g.pool()
    with pytest.raises(RuntimeError, match="without a capture in progress"):
        g.capture_end()


def test_capture_must_end_on_its_stream(side):
    g = torch.accelerator.Graph()
    with side:
        g.capture_begin()
    with pytest.raises(RuntimeError, match="must end on the stream it began on"):
        g.capture_end()  # on the default stream: the capture goes on
    assert side.is_capturing()
    with side:
        g.capture_end()
    assert not side.is_capturing()


def test_the_default_stream_never_captures_as_on_cuda():
    g = torch.accelerator.Graph()
    for default in (torch.vdev.default_stream(), torch.vdev.default_stream(1)):
        with default, pytest.raises(RuntimeError, match="must be captured on a non-default"):
            g.capture_begin()
        assert not default.is_capturing()
    x = torch.ones(2, device="vdev")
    g2, y = capture(lambda: x + 1, torch.vdev.Stream())
    g2.replay()  # replaying on the default stream is fine
    assert y.cpu().tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="must be captured on a non-default"):
        with torch.vdev.graph(torch.vdev.VdevGraph(), stream=torch.vdev.default_stream()):
            pass


def test_bad_capture_error_mode_is_rejected():
    g = torch.accelerator.Graph(capture_error_mode="sometimes")
    with pytest.raises((RuntimeError, ValueError), match="sometimes"):
        g.capture_begin()


def test_graph_destroyed_with_a_replay_pending(side):
    x = torch.ones(1000, device="vdev")
    g, y = capture(lambda: x * 7, side)
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        g.replay()
        del g  # the queued replay keeps what it runs; the pool waits for it
        gate.open()
    assert torch.equal(y.cpu(), torch.full((1000,), 7.0))


def test_a_failing_operation_in_a_replay_names_it(side):
    x = torch.arange(4.0, device="vdev")
    idx = torch.tensor([0, 1], device="vdev")
    g, _ = capture(lambda: torch.index_select(x, 0, idx), side)
    idx.fill_(99)  # out of range at replay
    g.replay()
    # A device-side assert of a replayed kernel is one of the replay's, sticky as on CUDA.
    with pytest.raises(
        torch.AcceleratorError, match=r"graph replay: operation 1 of 1 \[aten::index_select"
    ):
        torch.vdev.synchronize()
    with pytest.raises(torch.AcceleratorError, match="unusable since"):
        (x + 1).tolist()


# ---- memory pools -----------------------------------------------------------------------------


def test_graph_memory_is_not_handed_to_other_work(side):
    x = torch.full((1 << 16,), 2.0, device="vdev")
    temporaries = []

    def body():
        t = x * 3  # a temporary freed inside the capture: its block stays the graph's
        temporaries.append(t.data_ptr())
        return t + 1

    g, y = capture(body, side)
    # Eager allocations of the temporary's size after the capture, on the capture stream (whose
    # freed blocks it would reuse): if the graph's block were handed out, one of them would get it
    # and every replay would overwrite it with 6.
    with side:
        others = [torch.full((1 << 16,), -5.0, device="vdev") for _ in range(8)]
    # Their fills ran on `side`: the reads below (on the current stream) are ordered after them,
    # as CUDA code must order them (unordered, a read could see the block before its fill).
    torch.vdev.current_stream().wait_stream(side)
    assert temporaries[0] not in {o.data_ptr() for o in others}
    g.replay()
    assert torch.equal(y.cpu(), torch.full((1 << 16,), 7.0))
    for o in others:
        assert torch.equal(o.cpu(), torch.full((1 << 16,), -5.0))


def test_freeing_the_graph_releases_its_pool(side):
    torch.vdev.synchronize()
    torch.vdev.empty_cache()
    base = torch.vdev.memory_reserved()
    x = torch.ones(1 << 20, device="vdev")  # 4 MiB
    g, y = capture(lambda: (x * 2) + 1, side)
    assert torch.vdev.memory_reserved() > base
    assert torch.vdev.memory_allocated() >= x.nbytes + y.nbytes
    del y
    torch.vdev.empty_cache()  # the graph still holds its pool
    held = torch.vdev.memory_reserved()
    assert held > base + x.nbytes
    del g
    torch.vdev.empty_cache()
    assert torch.vdev.memory_reserved() < held


def test_graphs_share_a_pool(side):
    handle = torch.vdev.graph_pool_handle()
    x = torch.ones(8, device="vdev")
    g1 = torch.vdev.VdevGraph()
    with torch.vdev.graph(g1, pool=handle, stream=side):
        a = x + 1
    g2 = torch.vdev.VdevGraph()
    with torch.vdev.graph(g2, pool=g1.pool(), stream=side):
        b = a * 2
    assert g1.pool() == g2.pool() == handle
    g1.replay()
    g2.replay()
    assert b.tolist() == [4.0] * 8


def test_a_bad_pool_id_is_a_value_error(side):
    g = torch.accelerator.Graph(pool=(3, 4))
    with side, pytest.raises(ValueError, match=r"got \(3, 4\)"):
        g.capture_begin()
    assert not side.is_capturing()


# ---- random numbers ---------------------------------------------------------------------------


def test_each_replay_draws_fresh_numbers_as_eager_calls_would(side):
    torch.manual_seed(123)
    r = torch.empty(16, device="vdev")
    g, _ = capture(lambda: r.normal_(), side)
    replays = []
    for _ in range(3):
        g.replay()
        replays.append(r.cpu().clone())
    assert not torch.equal(replays[0], replays[1])
    torch.manual_seed(123)
    eager = [torch.empty(16, device="vdev").normal_().cpu() for _ in range(3)]
    for a, b in zip(replays, eager, strict=True):
        assert torch.equal(a, b)


def test_generator_calls_a_replay_could_not_repeat_raise_during_capture(side):
    # CUDA's rules (torch 2.10+): the same seed is accepted and changes nothing, another one is
    # refused; offsets, seed() and new generators refuse; states can still be read.
    torch.manual_seed(7)
    gen = torch.vdev.default_generators[0]
    before = gen.get_state()
    g = torch.accelerator.Graph()
    with side, g:
        torch.manual_seed(7)  # same seed: nothing changes, the capture goes on
        with pytest.raises(RuntimeError, match="only if new seed is the same as the original"):
            torch.manual_seed(8)
        for call in (lambda: gen.get_offset(), lambda: gen.set_offset(0), lambda: gen.seed()):
            with pytest.raises(RuntimeError, match="during vdev graph capture"):
                call()
        with pytest.raises(RuntimeError, match="Cannot construct a new VdevGeneratorImpl"):
            torch.Generator(device="vdev")
        assert torch.equal(gen.get_state(), before)
        y = torch.rand(3, device="vdev")
    assert gen.initial_seed() == 7
    g.replay()
    first = y.cpu()
    g.replay()
    assert not torch.equal(first, y.cpu())  # still fresh numbers per replay
    torch.manual_seed(8)  # outside a capture: any seed
    assert gen.initial_seed() == 8


def test_checkpointing_inside_a_capture_recomputes_the_forwards_numbers(side):
    # get_state / set_state inside a capture read and set the generator's offset within the
    # graph (CUDA's intragraph offset), so the recompute draws what the forward drew. Before,
    # they moved the generator itself and the graph's gradient differed from eager's.
    import torch.utils.checkpoint as cp

    def fn(x):
        return x * torch.sigmoid(torch.randn(1, device="vdev"))

    torch.manual_seed(42)
    x = torch.ones(1, device="vdev", requires_grad=True)
    out = cp.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=True)
    (eager_grad,) = torch.autograd.grad(out, x)
    g = torch.vdev.VdevGraph()
    with torch.vdev.graph(g, stream=side):
        gx = torch.ones(1, device="vdev", requires_grad=True)
        gout = cp.checkpoint(fn, gx, use_reentrant=False, preserve_rng_state=True)
        (graph_grad,) = torch.autograd.grad(gout, gx)
    torch.manual_seed(42)
    g.replay()
    assert gout.item() == out.item()
    assert graph_grad.item() == eager_grad.item()


def test_setting_the_rng_state_inside_a_capture_leaves_the_generator_alone(side):
    torch.manual_seed(0)
    start = torch.vdev.get_rng_state()
    a = torch.rand(3, device="vdev")
    x = torch.zeros(1, device="vdev")
    with torch.vdev.graph(torch.vdev.VdevGraph(), stream=side):
        torch.vdev.set_rng_state(start)  # rewinds the offset within the graph only
        x.add_(1)
    b = torch.rand(3, device="vdev")  # eager numbers go on from where they were
    assert not torch.equal(a.cpu(), b.cpu())


def test_capture_does_not_advance_the_generator_and_replay_does(side):
    gen = torch.Generator(device="vdev")
    gen.manual_seed(7)
    r = torch.empty(4, device="vdev")
    before = gen.get_offset()
    g, _ = capture(lambda: (r.uniform_(generator=gen), r.bernoulli_(0.5, generator=gen)), side)
    assert gen.get_offset() == before
    g.replay()
    assert gen.get_offset() == before + 8  # two draws of 4 per replay, as eager
    g.replay()
    assert gen.get_offset() == before + 16


def test_dropout_in_a_graph_changes_per_replay(side):
    torch.manual_seed(0)
    x = torch.ones(256, device="vdev")
    g, y = capture(lambda: torch.nn.functional.dropout(x, 0.5, training=True), side)
    g.replay()
    first = y.cpu().clone()
    g.replay()
    assert not torch.equal(first, y.cpu())
    assert set(first.unique().tolist()) <= {0.0, 2.0}


# ---- capture errors ---------------------------------------------------------------------------


def capture_error(body, stream, mode="default"):
    """Runs body inside a capture; returns the errors raised (the body's, then capture_end's)."""
    g = torch.accelerator.Graph(capture_error_mode=mode)
    with pytest.raises(RuntimeError) as info:
        with stream, g:
            body()
    return str(info.value), str(info.value.__context__ or "")


def test_unjoined_side_stream_is_a_capture_error(side):
    other = torch.vdev.Stream()
    x = torch.ones(3, device="vdev")

    def body():
        other.wait_stream(side)
        with other:
            x.add_(1)

    end, _ = capture_error(body, side)
    assert "not joined back" in end and f"stream {other.stream_id}" in end
    assert not other.is_capturing()
    assert (x + 0).tolist() == [1.0] * 3  # nothing ran, the device works


def _event_query(stream):
    e = torch.Event(device="vdev")
    e.record(stream)
    e.query()


def _event_sync(stream):
    e = torch.Event(device="vdev")
    e.record(stream)
    e.synchronize()


HOST_WAITS = {
    "item": (lambda x, s: (x + 1).sum().item(), "aten::_local_scalar_dense (.item())"),
    "synchronize": (lambda x, s: torch.vdev.synchronize(), "synchronize is not permitted"),
    "stream synchronize": (lambda x, s: s.synchronize(), "Stream.synchronize"),
    "stream query": (lambda x, s: s.query(), "Stream.query"),
    "event query": (lambda x, s: _event_query(s), "Event.query"),
    "event synchronize": (lambda x, s: _event_sync(s), "Event.synchronize"),
    "to pageable host": (lambda x, s: (x + 1).cpu(), "copy_ from device to host"),
    "to pageable host, non_blocking": (
        lambda x, s: torch.empty(4).copy_(x, non_blocking=True),
        "copy_ from device to pageable host memory",
    ),
    "from pageable host": (
        lambda x, s: x.copy_(torch.ones(4), non_blocking=True),
        "copy_ from pageable host memory",
    ),
    "torch.tensor": (lambda x, s: torch.tensor([1.0], device="vdev"), "copy_ from host to device"),
    "empty_cache": (lambda x, s: torch.vdev.empty_cache(), "empty_cache"),
    "another device": (lambda x, s: x.to("vdev:1"), "another device"),
    "nonzero (runs on the host)": (lambda x, s: torch.nonzero(x), "aten::nonzero"),
}


@pytest.mark.parametrize("case", sorted(HOST_WAITS))
def test_capture_errors_name_the_operation_and_leave_the_device_working(case, side):
    body, name = HOST_WAITS[case]
    x = torch.arange(4.0, device="vdev")
    end, cause = capture_error(lambda: body(x, side), side)
    # The body's error names the operation; capture_end's says the capture was invalidated by it.
    assert name in cause, cause
    assert "invalidated" in cause
    assert "invalidated by" in end and name in end, end
    assert not side.is_capturing()
    with side:
        assert (x * 2).tolist() == [0.0, 2.0, 4.0, 6.0]  # the device and its data are intact
    g, y = capture(lambda: x + 1, side)  # and capture works again
    g.replay()
    assert y.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_queueing_after_an_invalidating_error_says_so(side):
    x = torch.ones(2, device="vdev")
    g = torch.accelerator.Graph()
    side.__enter__()
    try:
        g.capture_begin()
        with pytest.raises(RuntimeError):
            x.sum().item()
        with pytest.raises(RuntimeError, match="invalidated by an earlier error"):
            x.add_(1)
        with pytest.raises(RuntimeError, match="invalidated by aten::_local_scalar_dense"):
            g.capture_end()
    finally:
        side.__exit__(None, None, None)
    assert x.tolist() == [1.0, 1.0]


def _synchronize_on_another_thread():
    result = []

    def run():
        try:
            torch.vdev.synchronize()
            result.append("ok")
        except RuntimeError as e:
            result.append(str(e))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return result[0]


def test_global_mode_forbids_unsafe_calls_on_other_threads(side):
    seen = []
    end, _ = capture_error(lambda: seen.append(_synchronize_on_another_thread()), side, "global")
    assert 'capture_error_mode="global" on another thread' in seen[0]
    assert "invalidated by synchronize" in end


@pytest.mark.parametrize("mode", ["thread_local", "relaxed"])
def test_other_modes_let_other_threads_synchronize(mode, side):
    seen = []
    x = torch.zeros(2, device="vdev")

    def body():
        seen.append(_synchronize_on_another_thread())
        x.add_(1)

    g, _ = capture(body, side, capture_error_mode=mode)
    assert seen == ["ok"]
    g.replay()
    assert x.tolist() == [1.0, 1.0]


def test_thread_local_mode_forbids_unsafe_calls_on_the_capturing_thread(side):
    end, cause = capture_error(lambda: torch.vdev.synchronize(), side, "thread_local")
    assert 'capture_error_mode="thread_local"' in cause


def test_relaxed_mode_permits_unsafe_calls_but_not_waiting_for_the_capture(side):
    x = torch.zeros(2, device="vdev")

    def body():
        torch.vdev.synchronize()  # permitted: waits for work queued before the capture only
        torch.vdev.empty_cache()
        x.add_(1)

    g, _ = capture(body, side, capture_error_mode="relaxed")
    g.replay()
    assert x.tolist() == [1.0, 1.0]
    end, cause = capture_error(lambda: side.synchronize(), side, "relaxed")
    assert "Stream.synchronize" in cause


def test_a_graph_replayed_inside_another_capture_becomes_part_of_it(side):
    x = torch.zeros(3, device="vdev")
    inner, _ = capture(lambda: x.add_(1), side)
    outer, _ = capture(lambda: (inner.replay(), x.mul_(2)), side)
    outer.replay()
    outer.replay()
    assert x.tolist() == [6.0] * 3  # ((0 + 1) * 2 + 1) * 2

    r = torch.empty(3, device="vdev")
    noisy, _ = capture(lambda: r.uniform_(), side)
    end, cause = capture_error(lambda: noisy.replay(), side)
    assert "draws random numbers while" in end + cause
