"""The uninitialised-read tool ("init") and poisoning ("poison") of torch.vdev.sanitizer."""

import inspect

import pytest
import torch
import torch.distributed as dist
from asyncutil import gated
from torch.vdev.sanitizer import UninitializedReadError

from child_process import run_python

DEV = "vdev"


@pytest.fixture(autouse=True)
def restore_tools():
    before = torch.vdev.sanitizer.enabled()
    yield
    torch.vdev.sanitizer.disable()
    if before - {"warn"}:
        torch.vdev.sanitizer.enable(before - {"warn"}, warn="warn" in before)
    torch.vdev.sanitizer.clear_findings()


def here() -> int:
    return inspect.currentframe().f_back.f_lineno


def test_reading_memory_no_operation_wrote_raises_with_the_allocating_stack():
    with torch.vdev.sanitizer.sanitize("init"):
        x = torch.empty(100, device=DEV)
        line_alloc = here() - 1
        with pytest.raises(UninitializedReadError) as raised:
            x.sum()
        line_read = here() - 1
    message = str(raised.value)
    assert isinstance(raised.value, RuntimeError)
    assert message.startswith("uninitialized read: aten::sum on vdev:0 stream 0")
    assert "reads a tensor of shape [100], dtype torch.float32" in message
    allocated, read = message.split("The memory was allocated at")[1].split("The read")
    assert f"line {line_alloc}, in test_reading_memory" in allocated
    assert f"line {line_read}, in test_reading_memory" in read


def test_a_partly_written_buffer_is_reported_until_every_byte_read_is_written():
    with torch.vdev.sanitizer.sanitize("init"):
        x = torch.empty(10, device=DEV)
        x[:5].fill_(1)
        x[:5].sum()  # written bytes only: fine
        with pytest.raises(UninitializedReadError, match="byte at offset 20 "):
            x.sum()
        x[5:].fill_(2)
        assert x.sum().item() == 15


def test_a_cached_block_handed_out_again_starts_unwritten():
    with torch.vdev.sanitizer.sanitize("init"):
        x = torch.ones(256, device=DEV)
        ptr = x.data_ptr()
        del x
        y = torch.empty(256, device=DEV)
        assert y.data_ptr() == ptr  # the same block, holding ones
        with pytest.raises(UninitializedReadError):
            y.max()


def test_out_copies_fills_random_fills_and_kernels_initialise():
    with torch.vdev.sanitizer.sanitize("init"):
        a = torch.randn(8, device=DEV)
        out = torch.empty(8, device=DEV)
        torch.add(a, 1, out=out)
        c = torch.empty(8, device=DEV).copy_(torch.arange(8.0))
        d = torch.empty(8, device=DEV)
        d.copy_(out)
        e = torch.empty(8, device=DEV).normal_()
        f = torch.empty(8, device=DEV).zero_()
        g = torch.empty(8, device=DEV)
        g[:] = 3
        compiled = torch.compile(lambda t: t * 2 + 1)
        h = compiled(c)
        total = sum(t.sum() for t in (a, out, c, d, e, f, g, h))
        total.item()
        x = torch.empty(4, 4, device=DEV)
        x.resize_(8, 4)  # grows: the first 16 values are kept, the rest are new and unwritten
        x[:4].sum()
        with pytest.raises(UninitializedReadError):
            x.sum()
    assert torch.vdev.sanitizer.finding_count() == 1


def test_a_reduction_that_excludes_self_initialises_what_it_writes():
    index = torch.tensor([0, 1, 1, 2], device=DEV)
    src = torch.ones(4, device=DEV)
    with torch.vdev.sanitizer.sanitize("init"):
        out = torch.empty(3, device=DEV)
        out.scatter_reduce_(0, index, src, "amax", include_self=False)  # self not read
        assert out.sum().item() == 3
        with pytest.raises(UninitializedReadError, match="aten::scatter_reduce_"):
            torch.empty(3, device=DEV).scatter_reduce_(0, index, src, "amax")  # includes self


def test_a_collective_initialises_its_output_and_reads_its_input(tmp_path):
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("vccl", store=store, rank=0, world_size=1)
    try:
        with torch.vdev.sanitizer.sanitize("init"):
            src = torch.ones(4, device=DEV)
            out = torch.empty(4, device=DEV)
            dist.all_gather_into_tensor(out, src)
            assert out.sum().item() == 4
            with pytest.raises(UninitializedReadError, match="allreduce"):
                dist.all_reduce(torch.empty(4, device=DEV))  # reduced in place: read first
            dist.all_reduce(out)
            assert out.sum().item() == 4
    finally:
        dist.destroy_process_group()


def test_streams_and_init_combine():
    torch.vdev.sanitizer.enable("streams,init")
    assert torch.vdev.sanitizer.enabled() == {"streams", "init"}
    x = torch.empty(4, device=DEV)
    with pytest.raises(UninitializedReadError):
        x.neg()
    x.fill_(1)
    with (
        torch.vdev.stream(torch.vdev.Stream()),
        pytest.raises(torch.vdev.sanitizer.StreamRaceError),
    ):
        x.neg()


def test_poison_fills_fresh_blocks_with_nan_and_all_ones_bits():
    with torch.vdev.sanitizer.sanitize("poison"):
        f = torch.empty(16, device=DEV)
        i = torch.empty(16, dtype=torch.int32, device=DEV)
        h = torch.empty(16, dtype=torch.bfloat16, device=DEV)
        assert f.isnan().all().item()
        assert h.isnan().all().item()
        assert (i == -1).all().item()


def test_poison_shows_a_read_of_memory_freed_while_another_stream_used_it():
    side = torch.vdev.Stream()
    with torch.vdev.sanitizer.sanitize("poison"):
        for record in (False, True):
            x = torch.ones(1024, device=DEV)
            side.wait_stream(torch.vdev.current_stream())
            with gated(side):
                with torch.vdev.stream(side):
                    y = x * 2  # queued behind the gate: runs after the free below
                if record:
                    x.record_stream(side)
                del x  # without record_stream the block is poisoned on the default stream now
                torch.vdev.current_stream().synchronize()
            torch.vdev.synchronize()
            if record:
                assert (y == 2).all().item()
            else:
                assert y.isnan().all().item()


def test_poisoning_never_changes_a_correct_programs_results():
    def program():
        torch.manual_seed(0)
        x = torch.randn(64, 64, device=DEV)
        y = torch.empty(64, 64, device=DEV)
        torch.mm(x, x, out=y)
        return (y.relu() + x).sum(0).cpu()

    plain = program()
    with torch.vdev.sanitizer.sanitize("poison"):
        poisoned = program()
    assert torch.equal(plain, poisoned)


def test_vdev_sanitizer_init_from_the_environment():
    done = run_python(
        """
        import torch
        try:
            torch.empty(3, device="vdev").sum()
        except torch.vdev.sanitizer.UninitializedReadError:
            print("caught")
        """,
        env={"VDEV_SANITIZER": "init"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "caught"
