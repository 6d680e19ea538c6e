"""The stream sanitizer (torch.vdev.sanitizer, "streams"): every seeded race is reported at the call
that makes it, every run, naming the tensor, both operations, both streams and both Python stacks;
the same programs with the missing synchronization added report nothing."""

import inspect
import warnings

import pytest
import torch
import torch.distributed as dist
from asyncutil import gated, run_in_threads, wait_until_blocked, wait_until_idle
from torch.vdev.sanitizer import StreamRaceError

from child_process import run_python

DEV = "vdev"


@pytest.fixture(autouse=True)
def streams_sanitizer():
    torch.vdev.synchronize(0)
    torch.vdev.synchronize(1)
    with torch.vdev.sanitizer.sanitize("streams"):
        yield
    torch.vdev.sanitizer.clear_findings()


def here() -> int:
    """The caller's line number (to find it in a reported stack)."""
    return inspect.currentframe().f_back.f_lineno


def written(n: int = 1000, device: str = DEV) -> torch.Tensor:
    """A tensor written (filled) on the current stream."""
    return torch.ones(n, device=device)


def test_a_read_on_another_stream_without_a_wait_is_a_race_with_both_stacks():
    x = written()
    line_write = here() - 1
    side = torch.vdev.Stream()
    with torch.vdev.stream(side), pytest.raises(StreamRaceError) as raised:
        x * 2
    line_read = here() - 1
    message = str(raised.value)
    assert isinstance(raised.value, RuntimeError)
    assert message.startswith("data race: aten::mul on vdev:0 stream ")
    assert (
        "reads a tensor of shape [1000], dtype torch.float32, on vdev:0, in allocation" in message
    )
    assert "aten::fill_, queued earlier on vdev:0 stream 0 (the default stream), writes" in message
    earlier, now = message.split("The earlier access was queued at")[1].split("This access")
    assert f"line {line_write}, in test_a_read_on_another_stream" in earlier
    assert f"line {line_read}, in test_a_read_on_another_stream" in now


@pytest.mark.parametrize("kind", ["write after read", "write after write"])
def test_writes_race_with_unordered_reads_and_writes_of_another_stream(kind):
    x = written()
    side = torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.stream(side):
        if kind == "write after read":
            x.sum()
        else:
            x.add_(1)
    with pytest.raises(StreamRaceError, match=r"data race: aten::mul\S* on vdev:0 stream 0 "):
        x.mul_(3)  # the default stream did not wait for the side stream


def test_reads_of_two_streams_do_not_race():
    x = written()
    side = torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.stream(side):
        a = x * 2
    b = x * 3
    torch.vdev.synchronize()
    assert a.sum().item() == 2000 and b.sum().item() == 3000


def _order_by_wait_stream(side, default):
    side.wait_stream(default)


def _order_by_event(side, default):
    e = torch.vdev.Event()
    e.record(default)
    side.wait_event(e)


def _order_by_event_synchronize(side, default):
    e = default.record_event()
    e.synchronize()


def _order_by_event_query(side, default):
    e = default.record_event()
    default.synchronize()
    assert e.query()


def _order_by_stream_synchronize(side, default):
    default.synchronize()


def _order_by_stream_query(side, default):
    default.synchronize()
    assert default.query()


def _order_by_device_synchronize(side, default):
    torch.vdev.synchronize()


def _order_by_item(side, default):
    # .item() of a value computed after the write: a blocking read of the default stream.
    torch.ones(1, device=DEV).add(0).item()


def _order_by_blocking_copy(side, default):
    torch.ones(3, device=DEV).cpu()


@pytest.mark.parametrize(
    "order",
    [
        _order_by_wait_stream,
        _order_by_event,
        _order_by_event_synchronize,
        _order_by_event_query,
        _order_by_stream_synchronize,
        _order_by_stream_query,
        _order_by_device_synchronize,
        _order_by_item,
        _order_by_blocking_copy,
    ],
    ids=lambda f: f.__name__[len("_order_by_") :],
)
def test_each_synchronization_orders_the_streams(order):
    x = written()
    side = torch.vdev.Stream()
    order(side, torch.vdev.current_stream())
    with torch.vdev.stream(side):
        y = x * 2
        y.add_(1)
    torch.vdev.synchronize()
    assert y.sum().item() == 3000
    assert torch.vdev.sanitizer.finding_count() == 0


def test_disjoint_slices_of_one_tensor_on_two_streams_are_not_a_race():
    x = torch.zeros(200, 300, device=DEV)
    side = torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.stream(side):
        x[:100].fill_(1)  # rows: contiguous runs
        x[100:, :150].fill_(2)  # 100 rows of a column block: recorded by its extent
    x[100:, 150:].fill_(3)  # the other column block, interleaved with the side stream's
    torch.vdev.synchronize()
    assert x.sum().item() == 100 * 300 + 2 * 100 * 150 + 3 * 100 * 150
    with torch.vdev.stream(side):
        x[:, ::2].fill_(4)  # even columns
    x[:, 1::2].fill_(5)  # odd columns: interleaved bytes, none shared
    torch.vdev.synchronize()
    assert torch.vdev.sanitizer.finding_count() == 0


def test_overlapping_slices_race():
    x = torch.zeros(200, 300, device=DEV)
    side = torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.stream(side):
        x[100:, :150].fill_(2)
    with pytest.raises(StreamRaceError, match=r"shape \[50, 10\]"):
        x[150:, 140:150].fill_(3)


def test_freeing_memory_another_stream_still_uses_is_reported_at_its_reuse():
    side = torch.vdev.Stream()
    x = written(1 << 16)
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.stream(side):
        y = x * 2  # side reads x
    del x  # freed on the default stream without x.record_stream(side)
    with pytest.raises(StreamRaceError, match=r"record_stream\(vdev:0 stream \d+\)"):
        torch.ones(1 << 16, device=DEV)  # the same block, written on the default stream
    del y


def test_record_stream_keeps_the_block_from_the_next_owner():
    side = torch.vdev.Stream()
    x = written(1 << 16)
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.stream(side):
        y = x * 2
    x.record_stream(side)
    del x
    z = torch.ones(1 << 16, device=DEV)
    torch.vdev.synchronize()
    assert y.sum().item() == 2 * (1 << 16) and z.sum().item() == 1 << 16
    assert torch.vdev.sanitizer.finding_count() == 0


def test_warn_mode_reports_and_goes_on_with_the_same_results():
    # The race's order is fixed by a gate (the write waits until the racing read has run), so
    # that the result is known: what the program computes without the sanitizer in that order.
    # Warn mode reports and inserts no ordering of its own.
    torch.vdev.sanitizer.enable(warn=True)
    x = written()
    side = torch.vdev.Stream()
    torch.vdev.synchronize()
    torch.vdev.sanitizer.clear_findings()
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        x.add_(1)  # queued behind the gate
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.vdev.stream(side):
                y = x * 2
        wait_until_idle(side)  # the read ran before the write (bounded: never a hang)
    torch.vdev.synchronize()
    assert [str(w.message).split(":")[0] for w in caught] == ["data race"]
    assert y.sum().item() == 2000 and x.sum().item() == 2000
    assert [f.kind for f in torch.vdev.sanitizer.findings()] == ["data race"]


def test_races_on_another_device_and_ordered_cross_device_copies():
    x = written(device="vdev:1")
    y = x.to("vdev:0")  # ordered both ways with vdev:1's current stream (CUDA's copy barrier)
    y.add_(1)
    x.add_(1)
    side = torch.vdev.Stream(1)
    with torch.vdev.stream(side), pytest.raises(StreamRaceError, match="vdev:1 stream 0"):
        x * 2
    torch.vdev.synchronize(1)
    assert y.sum().item() == 2000


def test_threads_with_their_own_streams_and_tensors_do_not_race():
    def work(i):
        s = torch.vdev.Stream()
        with torch.vdev.stream(s):
            t = torch.ones(10_000, device=DEV)
            for _ in range(50):
                t = t * 1.0 + i
            t.sum().item()

    errors = run_in_threads(work, 4)
    assert errors == []


def test_a_graph_replay_writes_what_it_captured():
    static_in = written(64)
    out = torch.empty(64, device=DEV)
    g = torch.vdev.VdevGraph()
    side = torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.graph(g, stream=side):
        out.copy_(static_in * 2)
    torch.vdev.current_stream().wait_stream(side)
    g.replay()  # on the current (default) stream
    with torch.vdev.stream(side), pytest.raises(StreamRaceError, match="graph replay"):
        out.sum()
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.stream(side):
        assert out.sum().item() == 128


def test_a_compiled_kernel_reads_and_writes_its_buffers():
    def f(x):
        return x * 2 + 1

    compiled = torch.compile(f, fullgraph=True)
    x = written(64)
    side = torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.stream(side):
        y = compiled(x)  # ordered: no report
    with pytest.raises(StreamRaceError, match=r"while cpp_fused_\w+, queued earlier on vdev:0"):
        x.add_(1)  # the default stream did not wait for the kernel's read on the side stream
    current = torch.vdev.current_stream()
    current.wait_stream(side)
    x.add_(1)
    torch.vdev.synchronize()
    assert y.sum().item() == 3 * 64


def test_a_collective_writes_on_its_communication_stream(tmp_path):
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("vccl", store=store, rank=0, world_size=1)
    try:
        x = written()
        work = dist.all_reduce(x, async_op=True)
        side = torch.vdev.Stream()
        with torch.vdev.stream(side), pytest.raises(StreamRaceError, match="allreduce"):
            x * 2  # neither work.wait() nor an ordering with the current stream
        work.wait()  # the current stream waits for the collective
        assert (x * 2).sum().item() == 2000
    finally:
        dist.destroy_process_group()


def test_a_host_operator_reading_a_pending_device_to_host_copy_is_reported():
    x = written(256)
    host = torch.zeros(256).pin_memory()
    with gated(torch.vdev.current_stream()) as gate:
        host.copy_(x, non_blocking=True)
        wait_until_blocked(gate)
        with pytest.warns(
            UserWarning, match=r"data race: aten::sum on the host .*non_blocking copy"
        ):
            host.sum()  # reads zeros: the copy has not run
    torch.vdev.synchronize()
    torch.vdev.sanitizer.clear_findings()
    assert host.sum().item() == 256  # after the synchronize: not reported
    assert torch.vdev.sanitizer.finding_count() == 0


def test_a_host_write_into_the_pinned_source_of_a_pending_host_to_device_copy_is_advised_as_such():
    src = torch.ones(256).pin_memory()
    with gated(torch.vdev.current_stream()) as gate:
        dev = src.to(DEV, non_blocking=True)
        wait_until_blocked(gate)
        with pytest.warns(UserWarning, match=r"data race: aten::fill_ on the host") as warned:
            src.fill_(2)  # the copy has not read its source yet
    torch.vdev.synchronize()
    message = str(next(w.message for w in warned if "data race" in str(w.message)))
    assert (
        "writes a tensor of shape [256], dtype torch.float32, on cpu (pinned host memory" in message
    )
    assert "a non_blocking copy to the device has not finished reading" in message
    assert "record an event after the copy and wait on it" in message
    assert "before writing the pinned source" in message
    assert "from the device" not in message  # not the device-to-host advice
    # What the advice prevents: the copy ran after the write and read the new values.
    assert dev.sum().item() == 512


def test_the_earlier_stack_of_another_python_thread_is_in_the_report_while_it_is_symbolized():
    """Thread A queues a write; while A turns pending stacks (its own among them) into text, thread
    B races with that write. B's report must show A's stack, not "no Python frames": B read the
    stack's text while A held its batch (recorded_stack.h)."""
    import threading

    import torch._inductor.codecache as codecache

    x = torch.empty(1000, device=DEV)
    side = [torch.vdev.Stream(), torch.vdev.Stream()]
    queued = threading.Event()  # A has queued its write (its stack is pending)
    inside = threading.Event()  # A is symbolizing its batch
    reported = threading.Event()  # B has its report
    messages: list[str] = []
    original = codecache.PyCodeCache.__dict__["stack_frames_for_code"]

    def symbolizer_hook(filename, lineno):
        # torch's symbolizer asks this for every frame: hold thread A inside it, batch taken.
        # (Not a flush at A's own gather before the write: a gc may have asked for one.)
        if threading.current_thread().name == "writer" and queued.is_set() and not inside.is_set():
            inside.set()
            assert reported.wait(60), "thread B never reported"
        return None

    def writer_queues_a_fill():
        with torch.vdev.stream(side[0]):
            x.fill_(1)
        queued.set()
        torch.vdev.sanitizer._C._sanitizer_symbolize_stacks()

    def reader():
        assert inside.wait(60), "thread A never symbolized"
        try:
            with torch.vdev.stream(side[1]), pytest.raises(StreamRaceError) as raised:
                x * 2
            messages.append(str(raised.value))
        finally:
            reported.set()

    codecache.PyCodeCache.stack_frames_for_code = staticmethod(symbolizer_hook)
    try:
        errors = []

        def run(fn):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - returned to the test
                errors.append(e)

        threads = [
            threading.Thread(target=run, args=(writer_queues_a_fill,), name="writer"),
            threading.Thread(target=run, args=(reader,), name="reader"),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        codecache.PyCodeCache.stack_frames_for_code = original
        inside.set()
        reported.set()
    assert not errors, errors
    torch.vdev.synchronize()
    (message,) = messages
    earlier, now = message.split("The earlier access was queued at")[1].split("This access")
    assert "no Python frames" not in earlier, message
    assert "in writer_queues_a_fill" in earlier, message
    assert "in reader" in now, message


def test_correct_programs_report_nothing_and_compute_what_they_compute_unsanitized():
    def program():
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
        )
        model = model.to(DEV)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        side = torch.vdev.Stream()
        batches = [torch.randn(8, 16).pin_memory() for _ in range(4)]
        nxt = None
        with torch.vdev.stream(side):
            nxt = batches[0].to(DEV, non_blocking=True)
        for i in range(4):  # the prefetcher pattern: copies on a side stream, then wait
            torch.vdev.current_stream().wait_stream(side)
            inp = nxt
            inp.record_stream(torch.vdev.current_stream())
            if i + 1 < 4:
                with torch.vdev.stream(side):
                    nxt = batches[i + 1].to(DEV, non_blocking=True)
            loss = model(inp).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach().cpu() for p in model.parameters()]

    sanitized = program()
    assert torch.vdev.sanitizer.finding_count() == 0
    torch.vdev.sanitizer.disable()
    plain = program()
    for a, b in zip(sanitized, plain, strict=True):
        assert torch.equal(a, b)


def test_bad_tools_are_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown tool 'stream'.*streams, init, poison and warn"):
        torch.vdev.sanitizer.enable("stream")
    assert torch.vdev.sanitizer.enabled() == {"streams"}


def test_vdev_sanitizer_variable_switches_it_on_from_the_start():
    code = """
        import torch
        x = torch.ones(10, device="vdev")
        with torch.vdev.stream(torch.vdev.Stream()):
            try:
                x * 2
            except torch.vdev.sanitizer.StreamRaceError as e:
                print("caught", sorted(torch.vdev.sanitizer.enabled()))
    """
    done = run_python(code, env={"VDEV_SANITIZER": "streams"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "caught ['streams']"
    bad = run_python(
        "import torch\nprint(torch.vdev.device_count())\ntorch.ones(1, device='vdev')",
        env={"VDEV_SANITIZER": "streams,bogus"},
    )
    assert bad.returncode != 0
    assert "VDEV_SANITIZER='streams,bogus' is not valid: unknown tool 'bogus'" in bad.stderr
