"""No false alarm: correct programs, and a representative slice of this suite, run clean under the
stream sanitizer. The whole suite runs clean with VDEV_SANITIZER=streams too (docs/development.md:
a switch of its own, too slow for CI's budget)."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from child_process import child_env

ROOT = Path(__file__).resolve().parents[2]
DEV = "vdev"

# Streams and events, graphs, reduce-overhead, DDP and FSDP2 (vccl on its comm stream), copies,
# sparse tensors (their members, host runs and queued products).
SLICE = [
    "tests/streams/test_streams.py",
    "tests/graphs/test_graphs.py",
    "tests/compile/test_reduce_overhead.py",
    "tests/distributed/test_vccl_streams.py",
    "tests/distributed/test_sharded.py",
    "tests/profiler/test_profiler.py",
    "tests/layouts/test_sparse.py",
]


def test_a_representative_slice_of_the_suite_runs_clean_under_the_sanitizer():
    env = child_env({"VDEV_SANITIZER": "streams"})
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *SLICE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "data race" not in done.stdout + done.stderr


@pytest.fixture
def sanitized():
    with torch.vdev.sanitizer.sanitize("streams,init"):
        yield
    torch.vdev.sanitizer.clear_findings()


def test_a_dataloader_with_pinned_batches_prefetched_on_a_side_stream_is_clean(sanitized):
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
    loader = DataLoader(data, batch_size=16, pin_memory=True)
    model = torch.nn.Linear(8, 3).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    copy_stream = torch.vdev.Stream()
    batches = iter(loader)

    def prefetch():
        try:
            x, y = next(batches)
        except StopIteration:
            return None
        with torch.vdev.stream(copy_stream):
            return x.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True)

    nxt = prefetch()
    steps = 0
    while nxt is not None:
        torch.vdev.current_stream().wait_stream(copy_stream)
        x, y = nxt
        for t in (x, y):
            t.record_stream(torch.vdev.current_stream())
        nxt = prefetch()  # the next batch's copy overlaps this step
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
    torch.vdev.synchronize()
    assert steps == 4
    assert torch.vdev.sanitizer.finding_count() == 0
