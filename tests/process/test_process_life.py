"""Fork and exit: a child forked after vdev is initialised gets a clear error; the interpreter
exits cleanly (no hang, no crash) with work still queued or blocked, and prints the errors of
queued work that no synchronize reported."""

from conftest import run_python


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
        s = torch.vdev.Stream(1)
        rt.enqueue_gate(1, s.stream_id, rt.Gate())  # never opened
        for _ in range(1000):
            rt.enqueue_noop(1, s.stream_id)
        x = torch.ones(1 << 20, device="vdev:1")
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
            torch.relu(torch.ones(2, dtype=torch.bool, device="vdev"))  # fails too
        print("leaving")
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["reported", "leaving"]
    printed = [
        line for line in r.stderr.splitlines() if line.startswith("vdev: queued work failed")
    ]
    assert len(printed) == 2, r.stderr  # one line per stream with unreported errors
    assert any("[aten::index_select] index out of range" in line for line in printed)
    assert any("[aten::relu] Boolean inputs not supported" in line for line in printed)
    assert "index 7 is out of bounds" not in r.stderr  # reported by the synchronize: not again
