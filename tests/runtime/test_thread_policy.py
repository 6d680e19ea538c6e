"""The device's thread policy (cpp/backend/common/thread_policy.h): how many intra-op threads a
kernel runs with, and the host thread's idle OpenMP team given back when the device needs the
cores. Each test runs in a fresh interpreter: the policy reads the configuration and the CPU
count once per process."""

import os
import textwrap

import pytest

from child_process import run_python

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
        small = t.worker_intra_op_threads(0, elements=(1 << 22) - 1)
        large = t.worker_intra_op_threads(0, elements=1 << 22)
        torch.set_num_threads(1)  # the queueing thread's count caps both
        capped = t.worker_intra_op_threads(0, elements=1 << 22)
        print(cpus, small, large, capped)
        """
    )
    cpus, small, large, capped = map(int, out)
    assert (small, large, capped) == (max(1, cpus - 1), cpus, 1)


def test_a_kernel_aten_would_split_gets_every_core_while_a_host_thread_waits():
    # The host thread needs no core while it waits: a kernel below the large size (2^22) that
    # starts then gets them all, as a large one always does, if ATen would split it (2^15
    # elements, its grain size); while the host runs it leaves the host a core. The queueing
    # thread's set_num_threads still caps it.
    out = script_output(
        """
        import os, torch
        from torch_vdev import _testing as t
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        running = t.worker_intra_op_threads(0, elements=1 << 16)
        waiting = t.worker_intra_op_threads(0, elements=1 << 16, host_waits=True)
        mid_running = t.worker_intra_op_threads(0, elements=(1 << 22) - 1)
        mid_waiting = t.worker_intra_op_threads(0, elements=(1 << 22) - 1, host_waits=True)
        tiny = t.worker_intra_op_threads(0, elements=(1 << 15) - 1, host_waits=True)
        large = t.worker_intra_op_threads(0, elements=1 << 22, host_waits=True)
        torch.set_num_threads(1)
        capped = t.worker_intra_op_threads(0, elements=1 << 16, host_waits=True)
        print(cpus, running, waiting, mid_running, mid_waiting, tiny, large, capped)
        """
    )
    cpus, running, waiting, mid_running, mid_waiting, tiny, large, capped = map(int, out)
    assert (running, waiting, large, capped) == (max(1, cpus - 1), cpus, cpus, 1)
    assert (mid_running, mid_waiting) == (max(1, cpus - 1), cpus)
    assert tiny == max(1, cpus - 1)


@pytest.mark.skipif(CPUS < 2, reason="a one-core machine has no OpenMP team to give back")
def test_a_convolution_is_large_by_its_multiply_adds():
    # 16x64x16x16 -> 64 channels with a 3x3 kernel: no tensor reaches 2^22 elements (the output
    # has 2^18), but its 2^18 * 64 * 9 multiply-adds do (16 per element): a large kernel, for
    # which the host gives its team back, forward and backward. 32x32x8x8 -> 64 channels (2^17
    # * 32 * 9, a small CNN's) and a 1x1 kernel on 8 channels are below it: the host keeps its
    # team while it runs.
    out = script_output(
        """
        import torch
        import torch.nn.functional as F
        from torch_vdev import _testing as t
        torch.set_num_threads(2)
        x = torch.randn(16, 64, 16, 16, device="vdev", requires_grad=True)
        w = torch.randn(64, 64, 3, 3, device="vdev", requires_grad=True)
        xm, wm = torch.randn(32, 32, 8, 8, device="vdev"), torch.randn(64, 32, 3, 3, device="vdev")
        xs, ws = torch.randn(2, 8, 4, 4, device="vdev"), torch.randn(8, 8, 1, 1, device="vdev")
        r0 = t.host_team_releases()
        F.conv2d(xs, ws)
        F.conv2d(xm, wm, padding=1)
        r1 = t.host_team_releases()
        y = F.conv2d(x, w, padding=1)
        r2 = t.host_team_releases()
        y.sum().backward()
        r3 = t.host_team_releases()
        torch.vdev.synchronize()
        print(tuple(y.shape) == (16, 64, 16, 16), r1 - r0, r2 - r1, r3 - r2 >= 1)
        """
    )
    assert out == ["True", "0", "1", "True"]


def test_workers_running_at_once_share_the_cores():
    out = script_output(
        """
        import os, torch
        from asyncutil import gated, wait_until_blocked
        from torch_vdev import _testing as t
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        a, b = torch.vdev.Stream(), torch.vdev.Stream()
        with gated(a) as gate:
            wait_until_blocked(gate)  # a's worker is running a task
            shared = t.worker_intra_op_threads(0, elements=1 << 22, stream_id=b.stream_id)
        torch.vdev.synchronize()
        alone = t.worker_intra_op_threads(0, elements=1 << 22, stream_id=b.stream_id)
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
        print(t.worker_intra_op_threads(0), t.worker_intra_op_threads(0, elements=1 << 24),
              t.worker_intra_op_threads(0, elements=1 << 16, host_waits=True))
        """
    )
    assert out == ["1", "1", "1"]


def test_vdev_device_threads_is_not_shared_among_busy_workers_or_capped_by_the_cores():
    # A fixed count is what the user asked for, whatever the machine and the other streams do.
    out = script_output(
        """
        os.environ["VDEV_DEVICE_THREADS"] = str(2 * len(os.sched_getaffinity(0)))
        import sys, torch
        from asyncutil import gated, wait_until_blocked
        from torch_vdev import _testing as t
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(2 * cpus)
        a, b = torch.vdev.Stream(), torch.vdev.Stream()
        with gated(a) as gate:
            wait_until_blocked(gate)  # a's worker is running a task
            shared = t.worker_intra_op_threads(0, elements=1 << 22, stream_id=b.stream_id)
        torch.vdev.synchronize()
        print(cpus, shared)
        """
    )
    cpus, shared = map(int, out)
    assert shared == 2 * cpus


@pytest.mark.skipif(CPUS < 2, reason="a one-core machine has no OpenMP team to give back")
def test_a_host_thread_gives_its_idle_openmp_team_back_when_it_waits_for_the_device():
    # libgomp sleeps in the kernel at every barrier of every team once the process's pooled
    # threads outnumber the cores: the waiting host's idle team must not count. A host thread
    # runs a CPU parallel region (its team: pooled threads), then synchronizes behind a gate;
    # while it waits, its team is given back and the process has fewer threads.
    out = script_output(
        """
        import os, sys, threading, time, torch
        from asyncutil import gated, wait_until_blocked
        from torch_vdev import _testing as t
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
            releases = t.host_team_releases()
            waiter = threading.Thread(target=host)
            waiter.start()
            ready.wait(60)
            deadline = time.monotonic() + 60  # a bound, not a timing assertion
            while (t.host_team_releases() == releases or threads() >= counts[0]) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.001)
            released = t.host_team_releases() - releases
            fewer = counts[0] - threads()
        waiter.join(60)
        print(released, fewer > 0)
        """
    )
    assert out == ["1", "True"]


@pytest.mark.skipif(CPUS < 2, reason="a one-core machine has no OpenMP team to give back")
def test_queueing_a_large_kernel_gives_the_host_team_back_and_cpu_work_still_runs():
    out = script_output(
        """
        import os, time, torch
        from torch_vdev import _testing as t
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        threads = lambda: len(os.listdir("/proc/self/task"))
        x = torch.ones(1 << 22, device="vdev")
        (x + 1).sum().item()  # the worker and its team exist from here on
        c = torch.ones(1 << 22)
        total = c.sum().item()  # CPU work: this thread's team is made again
        before, releases = threads(), t.host_team_releases()
        y = x * 2  # a large kernel queued
        released = t.host_team_releases() - releases
        deadline = time.monotonic() + 60  # a bound, not a timing assertion
        while threads() >= before and time.monotonic() < deadline:
            time.sleep(0.001)
        # The CPU side is unaffected: a new team is made for its next parallel region.
        print(released, threads() < before, total == c.sum().item() == float(1 << 22), y[0].item())
        """
    )
    released, fewer, cpu_ok, y0 = out
    assert (released, fewer, cpu_ok) == ("1", "True", "True") and float(y0) == 2.0


def test_a_worker_waiting_on_an_event_keeps_its_team_and_leaves_the_cores_to_others():
    # Only host threads give their team back when they wait: a stream's worker blocked in a
    # wait_event task keeps the team its large kernels run with (remaking it costs ~30 us), and
    # while it waits it does not count as computing, so another stream's large kernel gets
    # every core.
    out = script_output(
        """
        import os, sys, time, torch
        from asyncutil import gated, wait_until_blocked
        from torch_vdev import _testing as t
        cpus = len(os.sched_getaffinity(0))
        torch.set_num_threads(cpus)
        a, b, c = torch.vdev.Stream(), torch.vdev.Stream(), torch.vdev.Stream()
        e = torch.vdev.Event()
        with gated(b) as gate:
            wait_until_blocked(gate)
            releases = t.host_team_releases()
            e.record(b)
            a.wait_event(e)
            deadline = time.monotonic() + 60  # a bound, not a timing assertion
            while t.stream_running_task(0, a.stream_id) != "wait_event":
                assert time.monotonic() < deadline
                time.sleep(0.001)
            released = t.host_team_releases() - releases  # by a's waiting worker: none
            busy = t.busy_workers()  # b's, held by the gate (a task it runs); not a's
            on_c = t.worker_intra_op_threads(0, elements=1 << 22, stream_id=c.stream_id)
            print(released, busy, cpus, on_c)
        torch.vdev.synchronize()
        """
    )
    released, busy, cpus, on_c = map(int, out)
    assert (released, busy, on_c) == (0, 1, max(1, cpus // 2))


@pytest.mark.skipif(CPUS < 2, reason="a one-core machine has no OpenMP team to give back")
def test_a_matrix_product_is_large_by_its_multiply_adds_not_its_tensors():
    # 256x512 @ 512x512: no tensor reaches 2^22 elements, but 2^26 multiply-adds do (16 per
    # element): a large kernel, for which the host gives its team back; 64x256 @ 256x512 (a small
    # MLP's, 2^23) and 8x8 @ 8x8 are below it.
    out = script_output(
        """
        import torch
        from torch_vdev import _testing as t
        torch.set_num_threads(2)
        a, b = torch.randn(256, 512, device="vdev"), torch.randn(512, 512, device="vdev")
        m, n = torch.randn(64, 256, device="vdev"), torch.randn(256, 512, device="vdev")
        s, u = torch.randn(8, 8, device="vdev"), torch.randn(8, 8, device="vdev")
        r0 = t.host_team_releases()
        s @ u
        m @ n
        r1 = t.host_team_releases()
        a @ b
        r2 = t.host_team_releases()
        torch.vdev.synchronize()
        print(r1 - r0, r2 - r1)
        """
    )
    assert out == ["0", "1"]


def test_a_forked_child_uses_the_device_without_hanging_on_the_parents_openmp_team():
    # A child of fork() inherits libgomp's record of the forking thread's team but not its
    # threads: giving that team back would wait for them for ever. The child runs large kernels
    # and waits for them; a child forked after vdev started raises CUDA's fork error instead.
    out = script_output(
        """
        import os, time, torch

        def run_in_child(body):
            pid = os.fork()
            if pid == 0:
                try:
                    body()
                    os._exit(0)
                except RuntimeError as e:
                    os._exit(3 if "forked subprocess" in str(e) else 4)
                except BaseException:
                    os._exit(5)
            deadline = time.monotonic() + 60  # a bound: a hung child fails, not hangs the test
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return os.waitstatus_to_exitcode(status)
                time.sleep(0.01)
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return "hung"

        def large_work():
            x = torch.ones(1 << 22, device="vdev")
            assert (x * 2).sum().item() == float(2 << 22)

        torch.set_num_threads(2)
        torch.ones(1 << 22).sum()  # the parent's OpenMP team
        before_init = run_in_child(large_work)
        large_work()  # the parent starts vdev
        torch.ones(1 << 22).sum()
        after_init = run_in_child(large_work)
        print(before_init, after_init)
        """
    )
    assert out == ["0", "3"]
