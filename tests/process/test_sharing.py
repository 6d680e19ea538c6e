"""vdev tensors shared between processes through torch.multiprocessing, with CUDA's rules
(python/torch_vdev/vdev/_sharing.py, backend/memory/ipc_sharing.h): the receiver's tensor is over
the same device memory, its stream waits for the sender's queued writes, the sender keeps the
memory until the receiver is done. The two-process scenarios run in sharing_scenarios.py."""

from __future__ import annotations

import json
import subprocess
import sys
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from child_process import child_env

SCRIPT = Path(__file__).with_name("sharing_scenarios.py")

# Above the suite's 300 s, so that run_scenario's own bound on a scenario's process (300 s), which
# fails with its output, comes first.
pytestmark = pytest.mark.timeout(360)


def run_scenario(name: str) -> tuple[dict, str]:
    env = child_env()
    r = subprocess.run(
        [sys.executable, str(SCRIPT), name], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert "scenario_error" not in result, result.get("traceback")
    return result, r.stderr


def describe(t: torch.Tensor, device: str) -> dict:
    return {
        "device": device,
        "dtype": str(t.dtype),
        "values": t.tolist(),
        "stride": list(t.stride()),
        "offset": t.storage_offset(),
        "type": type(t).__name__,
        "requires_grad": t.requires_grad,
    }


def test_a_spawned_consumer_gets_vdev_tensors_over_the_same_memory():
    res, _ = run_scenario("roundtrip")
    x = torch.arange(12.0)
    expected = {
        "view": describe(x[2:], "vdev:0"),
        "transposed": describe(torch.arange(6).reshape(2, 3).t(), "vdev:0"),
        "bool": describe(torch.tensor([True, False, True]), "vdev:0"),
        "param": describe(torch.nn.Parameter(torch.ones(2)), "vdev:0"),
        "empty": describe(torch.empty(0), "vdev:0"),
        "device1": describe(torch.arange(3.0), "vdev:1"),
        "again": describe(x, "vdev:0"),
    }
    consumer = res["consumer"]
    for name, want in expected.items():
        assert consumer[name] == want, name
    # the same storage sent twice is one storage there, and it cannot grow past the sent bytes
    assert consumer["same_storage"] is True
    assert "not resizable" in consumer["resize"]
    # the consumer's writes land in the producer's memory ...
    assert res["after_consumer_write"] == (x * 10).tolist()
    # ... and a received tensor sent back arrives as the producer's own storage
    assert res["returned"] == describe((x * 10)[1:3], "vdev:0")
    assert res["returned_is_own_storage"] is True
    assert res["exitcode"] == 0


def test_the_consumer_stream_waits_for_the_producers_queued_writes():
    res, _ = run_scenario("ordering")
    # The producer's fill was held by a gate until the consumer had queued x * 2 and recorded an
    # event after it: the event cannot have completed, and the result shows the fill.
    assert res["done_before_gate_opened"] is False
    assert res["values"] == [14.0] * 4
    assert res["exitcode"] == 0


def test_the_producer_keeps_the_memory_until_the_consumer_frees_it():
    res, stderr = run_scenario("lifetime")
    nbytes = res["n"] * 4
    assert res["received"] == "vdev:0"
    # dropped and collected by the producer while received: the block is still held (limbo) ...
    assert res["held_while_received"] == nbytes
    # ... so the producer's new tensors did not reuse it
    assert res["intact_after_producer_dropped"] is True
    assert res["released"] is True
    # freed by the consumer: the producer's ipc_collect frees it
    assert res["held_after_release"] == 0
    assert "exiting before every vdev tensor it shared was released" not in stderr
    assert res["exitcode"] == 0


def test_a_producer_that_exits_before_its_writes_ran_fails_the_consumer_clearly():
    res, _ = run_scenario("sender_exits")
    assert "the process that sent this tensor" in res["error"]
    assert "exited before its queued writes to it were done" in res["error"]
    assert res["kept"] == [0.0, 1.0, 2.0]
    assert res["device_works"] == [2.0, 2.0]


def test_a_forked_child_cannot_receive_a_vdev_tensor():
    res, stderr = run_scenario("forked_receiver")
    assert res["error"].startswith("RuntimeError")
    assert "cannot re-initialise vdev in a forked subprocess" in res["error"]
    assert res["exitcode"] == 0
    # the refused receive gave its reference back: the producer keeps nothing for it
    assert "exiting before every vdev tensor it shared was released" not in stderr


def test_many_tensors_as_a_spawned_process_arguments():
    res, stderr = run_scenario("process_arguments")
    assert res["count"] == 300 and res["devices"] == ["vdev:0", "vdev:1"]
    assert res["written"] is True
    assert res["fds_left_open"] == []  # the descriptors sent are not kept
    assert res["exitcode"] == 0
    assert "exiting before every vdev tensor it shared was released" not in stderr


def test_a_receiver_refuses_what_it_cannot_hold_and_the_sender_gets_it_back():
    res, stderr = run_scenario("receiver_limits")
    assert res["too_large"].startswith("OutOfMemoryError: ")
    assert "cannot map another process's 128.00 MiB" in res["too_large"]
    assert res["missing_device"].startswith("IndexError: ")
    assert "device index 1 out of range" in res["missing_device"]
    assert res["after_freeing_the_cache"] == [0.0, 1.0, 2.0]
    assert res["device_works"] == [2.0, 2.0]
    assert res["limbo"] == {"too_large": 0, "missing_device": 0, "after_freeing_the_cache": 0}
    assert "exiting before every vdev tensor it shared was released" not in stderr
    assert res["exitcode"] == 0


def test_a_vdev_storage_alone_and_a_non_leaf_tensor_are_refused_when_pickled():
    x = torch.ones(3, device="vdev")
    with pytest.raises(RuntimeError, match="Cannot pickle vdev storage"):
        ForkingPickler.dumps(x.untyped_storage())
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps(torch.ones(2, device="vdev", requires_grad=True) * 2)


def test_a_tensor_sent_through_a_pipe_to_this_process_is_its_own_storage():
    x = torch.arange(4.0, device="vdev")
    a, b = mp.Pipe()
    a.send([x[1:]])
    (y,) = b.recv()
    assert y.device == x.device and y.storage_offset() == 1
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    y.add_(1)
    assert x.tolist() == [0.0, 2.0, 3.0, 4.0]


def test_cpu_tensors_still_go_through_a_queue_once_vdev_is_initialised():
    torch.ones(1, device="vdev")
    q = mp.Queue()
    q.put({"x": torch.arange(4), "s": "text"})
    got = q.get(timeout=60)
    assert got["x"].tolist() == [0, 1, 2, 3] and got["s"] == "text"
