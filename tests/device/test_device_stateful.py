"""Hypothesis stateful test: the current device of every thread after any sequence of device
operations (set, exchange, maybe_exchange, nested guards of both kinds, invalid indices) equals a
model that tracks a current device and a stack of open guards per thread."""

import queue
import threading

import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from torch_vdev import _C

N_THREADS = 3
N_DEVICES = 2  # default configuration
INDICES = st.integers(min_value=-3, max_value=N_DEVICES + 2)


class Worker:
    """A persistent thread, so that thread-local device state survives across rules."""

    def __init__(self):
        self.jobs = queue.Queue()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            fn, done = job
            try:
                done.put((True, fn()))
            except BaseException as e:  # noqa: BLE001 (reported to the test thread)
                done.put((False, e))

    def call(self, fn):
        done = queue.Queue()
        self.jobs.put((fn, done))
        ok, value = done.get(timeout=30)
        return ok, value

    def stop(self):
        self.jobs.put(None)
        self.thread.join(timeout=30)


def valid(i):
    return 0 <= i < N_DEVICES


class DeviceStackMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.workers = [Worker() for _ in range(N_THREADS)]
        for w in self.workers:
            assert w.call(lambda: torch.vdev.set_device(0))[0]
        self.current = [0] * N_THREADS
        # Per thread: (guard object, device to restore on exit or None for a no-op guard).
        self.open_guards = [[] for _ in range(N_THREADS)]

    def teardown(self):
        for w in self.workers:
            w.stop()

    @rule(t=st.integers(0, N_THREADS - 1), i=INDICES)
    def set_device(self, t, i):
        ok, err = self.workers[t].call(lambda: torch.vdev.set_device(i))
        assert ok == valid(i), err
        if ok:
            self.current[t] = i
        else:
            assert isinstance(err, IndexError if i >= 0 else ValueError)
            assert f"device index {i}" in str(err)

    @rule(t=st.integers(0, N_THREADS - 1), i=INDICES)
    def accelerator_set_device_index(self, t, i):
        ok, err = self.workers[t].call(lambda: torch.accelerator.set_device_index(i))
        if i < 0:  # torch.accelerator ignores negative indices, as it does for CUDA
            assert ok
        else:
            assert ok == valid(i), err
            if ok:
                self.current[t] = i

    @rule(t=st.integers(0, N_THREADS - 1), i=INDICES)
    def exchange(self, t, i):
        ok, prev = self.workers[t].call(lambda: _C._exchange_device(i))
        assert ok == valid(i), prev
        if ok:
            assert prev == self.current[t]
            self.current[t] = i

    @rule(t=st.integers(0, N_THREADS - 1), i=INDICES)
    def maybe_exchange(self, t, i):
        ok, prev = self.workers[t].call(lambda: _C._maybe_exchange_device(i))
        assert ok == (valid(i) or i == -1), prev
        if ok:
            assert prev == self.current[t]
            if i != -1:
                self.current[t] = i

    @rule(t=st.integers(0, N_THREADS - 1), i=INDICES, kind=st.sampled_from(["vdev", "accel"]))
    def enter_guard(self, t, i, kind):
        def enter():
            g = torch.vdev.device(i) if kind == "vdev" else torch.accelerator.device_index(i)
            g.__enter__()
            return g

        ok, guard = self.workers[t].call(enter)
        noop = kind == "vdev" and i == -1
        assert ok == (valid(i) or noop), guard
        if ok:
            # A no-op guard (torch.vdev.device(-1)) restores nothing on exit, as with torch.cuda.
            self.open_guards[t].append((guard, None if noop else self.current[t]))
            if not noop:
                self.current[t] = i

    @precondition(lambda self: any(self.open_guards))
    @rule(data=st.data())
    def exit_guard(self, data):
        t = data.draw(st.sampled_from([k for k in range(N_THREADS) if self.open_guards[k]]))
        guard, before = self.open_guards[t].pop()
        ok, err = self.workers[t].call(lambda: guard.__exit__(None, None, None))
        assert ok, err
        if before is not None:
            self.current[t] = before

    @rule(t=st.integers(0, N_THREADS - 1), i=st.integers(0, N_DEVICES - 1))
    def tensor_op_on_device_keeps_current(self, t, i):
        ok, dev = self.workers[t].call(lambda: (torch.ones(2, device=f"vdev:{i}") * 2).device)
        assert ok and dev == torch.device("vdev", i), dev

    @invariant()
    def every_thread_matches_the_model(self):
        for t, w in enumerate(self.workers):
            ok, cur = w.call(torch.vdev.current_device)
            assert ok and cur == self.current[t], (t, cur, self.current[t])
            ok, acc = w.call(torch.accelerator.current_device_index)
            assert ok and acc == self.current[t]


TestDeviceStack = DeviceStackMachine.TestCase
