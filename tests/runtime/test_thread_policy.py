"""The device's thread policy (cpp/backend/common/thread_policy.h): how many intra-op threads a
kernel runs with, and the host thread's idle OpenMP team given back when the device needs the
cores. Each test runs in a fresh interpreter: the policy reads the configuration and the CPU
count once per process."""

import os
import textwrap

import pytest

from conftest import run_python

CPUS = len(os.sched_getaffinity(0))

# What every script starts with: no VDEV_DEVICE_THREADS (the policy, not a fixed count), unless
# the test sets it after this line.
PRELUDE = """
import os
import textwrap
os.environ.pop("VDEV_DEVICE_THREADS", None)
"""


def script_output(body: str, env: dict | None = None) -> list[str]:
    r = run_python(PRELUDE + textwrap.dedent(body), env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_large_kernels_get_every_core_and_small_ones_leave_one_to_the_host():
    out = script_output(
        """
        import os, torch
        from torch_vdev import _testing as t
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        small = t.worker_intra_op_threads(0, elements=(1 << 18) - 1)
        large = t.worker_intra_op_threads(0, elements=1 << 18)
        torch.set_num_threads(1)  # the queueing thread's count caps both
        capped = t.worker_intra_op_threads(0, elements=1 << 18)
        print(cpus, small, large, capped)
        """
    )
    cpus, small, large, capped = map(int, out)
    assert (small, large, capped) == (max(1, cpus - 1), cpus, 1)


def test_workers_running_at_once_share_the_cores():
    out = script_output(
        """
        import os, sys, torch
        sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
        from asyncutil import gated, wait_until_blocked
        from torch_vdev import _testing as t
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        a, b = torch.vdev.Stream(), torch.vdev.Stream()
        with gated(a) as gate:
            wait_until_blocked(gate)  # a's worker is running a task
            shared = t.worker_intra_op_threads(0, elements=1 << 20, stream_id=b.stream_id)
        torch.vdev.synchronize()
        alone = t.worker_intra_op_threads(0, elements=1 << 20, stream_id=b.stream_id)
        print(cpus, shared, alone)
        """
    )
    cpus, shared, alone = map(int, out)
    assert (shared, alone) == (max(1, cpus // 2), cpus)


def test_vdev_device_threads_is_a_fixed_count_for_every_kernel():
    out = script_output(
        """
        os.environ["VDEV_DEVICE_THREADS"] = "1"
        import torch
        from torch_vdev import _testing as t
        torch.set_num_threads(2)
        print(t.worker_intra_op_threads(0), t.worker_intra_op_threads(0, elements=1 << 24))
        """
    )
    assert out == ["1", "1"]


@pytest.mark.skipif(CPUS < 2, reason="a one-core machine has no OpenMP team to give back")
def test_a_host_thread_gives_its_idle_openmp_team_back_when_it_waits_for_the_device():
    # libgomp sleeps in the kernel at every barrier of every team once the process's pooled
    # threads outnumber the cores: the waiting host's idle team must not count. A host thread
    # runs a CPU parallel region (its team: cores - 1 pooled threads), then synchronizes behind a
    # gate; while it waits, the process has that many threads fewer.
    out = script_output(
        """
        import os, sys, threading, time, torch
        sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
        from asyncutil import gated, wait_until_blocked
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        threads = lambda: len(os.listdir("/proc/self/task"))
        s = torch.vdev.Stream()
        with torch.vdev.stream(s):
            torch.ones(8, device="vdev").add_(1)  # its worker exists from here on
        torch.vdev.synchronize()
        ready, counts = threading.Event(), []

        def host():
            with torch.vdev.stream(s):
                torch.ones(1 << 22).sum()  # CPU work: this thread's OpenMP team is made
                counts.append(threads())
                ready.set()
                torch.vdev.current_stream().synchronize()  # blocked behind the gate

        with gated(s) as gate:
            wait_until_blocked(gate)
            waiter = threading.Thread(target=host)
            waiter.start()
            ready.wait(60)
            deadline = time.monotonic() + 60  # a bound, not a timing assertion
            while threads() > counts[0] - (cpus - 1) and time.monotonic() < deadline:
                time.sleep(0.001)
            counts.append(threads())
        waiter.join(60)
        print(cpus, counts[0] - counts[1])
        """
    )
    cpus, released = map(int, out)
    assert released == cpus - 1


@pytest.mark.skipif(CPUS < 2, reason="a one-core machine has no OpenMP team to give back")
def test_queueing_a_large_kernel_gives_the_host_team_back_and_cpu_work_still_runs():
    out = script_output(
        """
        import os, time, torch
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        threads = lambda: len(os.listdir("/proc/self/task"))
        x = torch.ones(1 << 18, device="vdev")
        (x + 1).sum().item()  # the worker and its team exist from here on
        c = torch.ones(1 << 22)
        total = c.sum().item()  # CPU work: this thread's team is made again
        before = threads()
        y = x * 2  # a large kernel queued
        deadline = time.monotonic() + 60  # a bound, not a timing assertion
        while threads() > before - (cpus - 1) and time.monotonic() < deadline:
            time.sleep(0.001)
        after = threads()
        # The CPU side is unaffected: a new team is made for its next parallel region.
        print(cpus, before - after, total == c.sum().item() == float(1 << 22), y[0].item())
        """
    )
    cpus, released, cpu_ok, y0 = out
    assert int(released) == int(cpus) - 1
    assert cpu_ok == "True" and float(y0) == 2.0


@pytest.mark.skipif(CPUS < 2, reason="a one-core machine has no OpenMP team to give back")
def test_a_worker_waiting_on_an_event_keeps_its_openmp_team():
    # Only host threads give their team back when they wait: a stream's worker blocked in a
    # wait_event task keeps the team its large kernels run with (remaking it costs ~30 us).
    out = script_output(
        """
        import os, sys, time, torch
        sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
        from asyncutil import gated, wait_until_blocked
        from torch_vdev import _testing as t
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        threads = lambda: len(os.listdir("/proc/self/task"))
        a, b = torch.vdev.Stream(), torch.vdev.Stream()
        with torch.vdev.stream(a):
            x = torch.ones(1 << 20, device="vdev")
            (x * 2).sum()  # a large kernel: a's worker makes its team
        with torch.vdev.stream(b):
            torch.ones(8, device="vdev")  # b's worker exists
        torch.vdev.synchronize()
        before = threads()
        e = torch.vdev.Event()
        with gated(b) as gate:
            wait_until_blocked(gate)
            e.record(b)
            a.wait_event(e)
            deadline = time.monotonic() + 60  # a bound, not a timing assertion
            while t.stream_running_task(0, a.stream_id) != "wait_event":
                assert time.monotonic() < deadline
                time.sleep(0.001)
        torch.vdev.synchronize()
        print(before - threads())
        """
    )
    assert out == ["0"]


@pytest.mark.skipif(CPUS < 2, reason="a one-core machine has no OpenMP team to give back")
def test_a_matrix_product_is_large_by_its_multiply_adds_not_its_tensors():
    # 64x256 @ 256x512: no tensor reaches 2^18 elements, but 8.4M multiply-adds do (16 per
    # element): a large kernel, so queueing it gives the host's team back; 8x8 @ 8x8 does not.
    out = script_output(
        """
        import os, time, torch
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        threads = lambda: len(os.listdir("/proc/self/task"))
        a, b = torch.randn(64, 256, device="vdev"), torch.randn(256, 512, device="vdev")
        s, t = torch.randn(8, 8, device="vdev"), torch.randn(8, 8, device="vdev")
        (a @ b).sum().item()  # plans made, the worker's team exists
        c = torch.ones(1 << 22)
        c.sum()  # CPU work: the host's team
        before = threads()
        s @ t
        small = before - threads()
        a @ b
        deadline = time.monotonic() + 60  # a bound, not a timing assertion
        while threads() > before - (cpus - 1) and time.monotonic() < deadline:
            time.sleep(0.001)
        print(cpus, small, before - threads())
        """
    )
    cpus, small, large = map(int, out)
    assert (small, large) == (0, cpus - 1)
