"""Fork and exit: a child forked after vdev is initialised gets a clear error; the interpreter
exits cleanly (no hang, no crash) with work still queued or blocked, and prints the errors of
queued work that no synchronize reported."""

from child_process import run_python


def test_fork_after_initialisation_gives_a_clear_error_in_the_child():
    r = run_python(
        """
        import multiprocessing as mp
        import torch

        def child(q):
            try:
                torch.ones(2, device="vdev").sum().item()
                q.put("no error")
            except RuntimeError as e:
                q.put(str(e))
            try:
                q.put(f"count={torch.vdev.device_count()}")  # queries still work
            except Exception as e:  # noqa: BLE001
                q.put(repr(e))

        x = torch.ones(4, device="vdev") * 2  # initialises: memory and a stream worker
        q = mp.get_context("fork").Queue()
        p = mp.get_context("fork").Process(target=child, args=(q,))
        p.start()
        print(q.get(timeout=60))
        print(q.get(timeout=60))
        p.join(60)
        print("parent", x.sum().item(), p.exitcode)
        """
    )
    assert r.returncode == 0, r.stderr
    err, count, parent = r.stdout.strip().splitlines()
    assert "cannot re-initialise vdev in a forked subprocess; use the spawn start method" in err
    assert count == "count=2"
    assert parent == "parent 8.0 0"


def test_fork_before_initialisation_is_fine():
    r = run_python(
        """
        import multiprocessing as mp
        import torch

        def child(q):
            q.put(torch.ones(3, device="vdev:1").sum().item())

        q = mp.get_context("fork").Queue()
        p = mp.get_context("fork").Process(target=child, args=(q,))
        p.start()
        print(q.get(timeout=60))
        p.join(60)
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3.0"


def test_exit_with_queued_and_blocked_work_neither_hangs_nor_crashes():
    r = run_python(
        """
        import torch
        from torch_vdev import _testing as rt
        x = torch.ones(1 << 20, device="vdev:1")
        torch.vdev.synchronize(1)  # written before the side stream reads it
        s = torch.vdev.Stream(1)
        rt.enqueue_gate(1, s.stream_id, rt.Gate())  # never opened
        for _ in range(1000):
            rt.enqueue_noop(1, s.stream_id)
        with torch.vdev.stream(s):
            y = x.to("vdev:0")  # queued behind the closed gate
        print("leaving")
        """,
        timeout=60,  # a hang fails the test instead of blocking CI
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "leaving"
    assert "Traceback" not in r.stderr and "terminate" not in r.stderr


def test_an_error_no_synchronize_reported_is_printed_at_exit():
    r = run_python(
        """
        import torch
        ones = torch.ones(3, device="vdev")
        reported = ones[torch.tensor([7], device="vdev")]  # aten::index: "index 7 is out of bounds"
        try:
            torch.vdev.synchronize()
        except IndexError:
            print("reported")
        ones.index_select(0, torch.tensor([5], device="vdev"))  # fails, never synchronized
        side = torch.vdev.Stream()
        with torch.vdev.stream(side):
            torch.multinomial(torch.tensor([-1.0, 2.0], device="vdev"), 1)  # fails too
        # Both tasks must have run: exit abandons tasks not yet started (runtime/process.h).
        import time
        from torch_vdev import _testing as rt
        for s in (torch.vdev.default_stream(), side):
            while not rt.stream_query(s.device_index, s.stream_id):  # does not consume errors
                time.sleep(0.001)
        print("leaving")
        """,
        timeout=60,
        # Reporting at exit, not the lasting state of a device-side assert: these failures are
        # ones, which would refuse the later launches.
        env={"VDEV_STICKY_ASSERTS": "0"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["reported", "leaving"]
    printed = [
        line for line in r.stderr.splitlines() if line.startswith("vdev: queued work failed")
    ]
    assert len(printed) == 2, r.stderr  # one line per stream with unreported errors
    assert any("[aten::index_select] index out of range" in line for line in printed)
    assert any("[aten::multinomial] probability tensor contains" in line for line in printed)
    assert "index 7 is out of bounds" not in r.stderr  # reported by the synchronize: not again


# Exit rule (cpp/runtime/process.h): running tasks are waited for, queued ones abandoned, daemon
# threads inside vdev calls park, non-daemon threads are joined by Python first.

START_BUSY = """
import os, sys, threading, torch
from torch_vdev import _testing as rt
s = torch.vdev.Stream()
started = torch.vdev.Event()
started.record(s)
rt.enqueue_cpu_busy(0, s.stream_id, {seconds}, {path!r})  # real ATen kernels, then a file
rt.enqueue_noop(0, s.stream_id)  # queued behind it: abandoned at exit
started.synchronize()  # the worker has passed the event: the busy task is running now
"""


def test_exit_waits_for_a_running_kernel(tmp_path):
    done = tmp_path / "done"
    # 3 s: longer than the old exit limit (2 s), after which static destructors ran under it.
    r = run_python(START_BUSY.format(seconds=3.0, path=str(done)) + 'print("leaving")', timeout=90)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "leaving"
    assert done.read_text() == "done"  # the exit waited for the running kernel to finish
    assert "Segmentation" not in r.stderr and "terminate" not in r.stderr


def test_system_exit_keeps_its_code_with_a_kernel_running(tmp_path):
    done = tmp_path / "done"
    r = run_python(START_BUSY.format(seconds=1.0, path=str(done)) + "sys.exit(3)", timeout=90)
    assert r.returncode == 3, r.stderr
    assert done.read_text() == "done"
    assert r.stderr == ""


def test_daemon_threads_waiting_at_exit_neither_abort_nor_hang():
    r = run_python(
        """
        import threading, torch
        from torch_vdev import _testing as rt
        s = torch.vdev.Stream()
        rt.enqueue_gate(0, s.stream_id, rt.Gate())  # never opened: nothing behind it completes
        with torch.vdev.stream(s):
            x = torch.ones(4, device="vdev") * 2
            e = torch.vdev.Event()
            e.record()
        def copy():
            with torch.vdev.stream(s):  # ordered after x's kernel, behind the gate
                print(x.cpu())
        waits = {
            "stream": s.synchronize,
            "device": torch.vdev.synchronize,
            "event": e.synchronize,
            "copy": copy,
        }
        inside = threading.Barrier(len(waits) + 1)
        def wait(name):
            inside.wait()
            waits[name]()
            print("returned", name, flush=True)  # must never happen: the work never ran
        for name in waits:
            threading.Thread(target=wait, args=(name,), daemon=True).start()
        inside.wait()
        print("leaving")
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "leaving"
    # Before: "terminate called without an active exception" (rc 134) when exit woke them.
    assert "terminate" not in r.stderr and "Traceback" not in r.stderr
    assert "nanobind: leaked" not in r.stderr  # their arguments stay alive on purpose


def test_a_daemon_thread_inside_empty_cache_at_exit_holds_no_allocator_lock():
    # empty_cache waits for the device's queued work (here: behind a gate that never opens). At
    # exit the daemon thread parks in that wait; it used to hold the device cache's lock there,
    # and the main thread, freeing a tensor after vdev's exit handler, waited for it for ever.
    r = run_python(
        """
        import atexit, sys, threading
        kept = {}
        atexit.register(kept.clear)  # registered before vdev's handler: runs after it
        import torch
        from torch_vdev import _testing as rt
        kept["x"] = torch.ones(1000, device="vdev")
        cached = torch.ones(1 << 20, device="vdev")
        del cached  # a free segment: empty_cache has something to give back
        rt.enqueue_gate(0, 0, rt.Gate())  # never opened
        def release():
            torch.vdev.empty_cache()
            print("returned", flush=True)  # must never happen: the queued work never ran
        t = threading.Thread(target=release, daemon=True)
        t.start()
        while True:  # until the thread is inside empty_cache (its wait follows at once)
            frame = sys._current_frames().get(t.ident)
            if frame is not None and frame.f_code.co_name == "empty_cache":
                break
        print("leaving", flush=True)
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "leaving"
    assert "terminate" not in r.stderr and "Traceback" not in r.stderr


def test_a_daemon_thread_whose_wait_ends_during_exit_does_not_abort(tmp_path):
    done = tmp_path / "done"
    r = run_python(
        START_BUSY.format(seconds=1.0, path=str(done))
        + """
inside = threading.Barrier(2)
def wait():
    inside.wait()
    s.synchronize()  # ends while the exit drains the running task
threading.Thread(target=wait, daemon=True).start()
inside.wait()
print("leaving")
""",
        timeout=90,
    )
    assert r.returncode == 0, r.stderr
    assert "terminate" not in r.stderr and "Traceback" not in r.stderr
    assert done.read_text() == "done"


def test_a_non_daemon_thread_finishes_its_work_before_exit():
    r = run_python(
        """
        import threading, torch
        def work():
            x = torch.ones(1000, device="vdev:1")
            for _ in range(50):
                x = x * 1.01 + 0.5
            print(round(x.sum().item()))
        threading.Thread(target=work).start()  # not joined: Python joins it before exit
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    expected = 1.0
    for _ in range(50):
        expected = expected * 1.01 + 0.5
    assert r.stdout.strip() == str(round(1000 * expected))


# Fork (cpp/runtime/process.h): the prepare handler takes every registered lock, so a child never
# inherits one held by a thread that does not exist there.


def test_fork_while_every_backend_lock_is_held_gives_a_child_with_no_lock_held():
    r = run_python(
        """
        import gc, os, torch
        from torch_vdev import _testing as rt
        x = torch.ones(100, device="vdev:0") * 2
        y = torch.ones(10, device="vdev:1") + 1
        p = torch.empty(64, pin_memory=True)
        z = p.to("vdev:0", non_blocking=True)
        torch.vdev.manual_seed_all(2)
        torch.vdev.synchronize()
        n = rt.fork_lock_count()
        for i in range(n):
            # Each held by a thread of its own until fork() begins (60 s at most).
            rt.hold_fork_lock(i, 60_000)
        held = rt.held_fork_locks()
        pid = os.fork()
        if pid == 0:
            code = min(rt.held_fork_locks(), 50)
            del x, y, z, p  # frees into the inherited caches: would hang on a held lock
            gc.collect()
            torch.vdev.manual_seed_all(1)  # the generators' locks
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(n, held, os.waitstatus_to_exitcode(status))
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    n, held, child = map(int, r.stdout.split())
    assert n >= 20  # streams, allocators, generators, plan and operator tables, arenas
    assert held == n  # every lock was held when fork() was called
    assert child == 0  # and none is held in the child


def test_fork_while_threads_churn_the_allocators_and_the_executor():
    r = run_python(
        """
        import gc, os, threading, torch
        torch.randn(3, device="vdev:1")
        torch.empty(4, pin_memory=True)
        stop = threading.Event()
        def churn(device):
            while not stop.is_set():
                x = torch.randn(1000, device=device)
                (x * 2).sum()
                p = torch.empty(4096, pin_memory=True)
                p.to(device, non_blocking=True)
                torch.vdev.manual_seed_all(3)
        threads = [threading.Thread(target=churn, args=(f"vdev:{i % 2}",)) for i in range(4)]
        for t in threads:
            t.start()
        keep = [torch.ones(100, device="vdev") for _ in range(10)]
        codes = []
        for _ in range(8):
            pid = os.fork()
            if pid == 0:
                torch.vdev.manual_seed_all(1)
                del keep[:]
                gc.collect()
                try:
                    torch.ones(2, device="vdev").sum().item()
                    os._exit(3)
                except RuntimeError as e:
                    os._exit(0 if "forked subprocess" in str(e) else 4)
            codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        stop.set()
        for t in threads:
            t.join()
        print(codes)
        """,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str([0] * 8)


def test_a_script_that_ends_right_after_a_backward_exits_cleanly():
    """torch 2.13 stashes a Python object in every backward's thread-local state; autograd's vdev
    device thread used to drop the last reference to it while the interpreter finalized
    ("terminate called without an active exception"). vdev's exit handler lets the device threads
    finish first. The race is intermittent (about 1 in 4 runs of this script aborted before the
    fix, on a quiet 2-core machine), so the script runs several times: a regression is likely,
    not certain, to be caught by one run of this test."""
    import subprocess
    import sys

    script = (
        "import torch, torch_vdev\n"
        "x = torch.ones(3, device='vdev', requires_grad=True)\n"
        "x.pow(2).sum().backward()\n"
        "s = torch.eye(3, dtype=torch.float64).to_sparse().to('vdev').requires_grad_()\n"
        "s.to_dense().pow(2).sum().backward()\n"
    )
    for _ in range(3):
        p = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
        )
        assert p.returncode == 0, p.stderr
        assert "terminate called" not in p.stderr
