"""Stateful property test of the caching device allocator (issue 5): random allocations, frees,
uses on other streams with record_stream, stream switches, gates and empty_cache, checked against
a model after every step."""

import torch
from asyncutil import sid
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from torch_vdev import _testing as rt

DEVICE = 1
# Small-pool, large-pool and segment-sized requests (bytes).
SIZES = st.one_of(
    st.integers(1, 4096), st.integers(512 << 10, 3 << 20), st.sampled_from([2 << 20, 11 << 20])
)


class Live:
    def __init__(self, tensor, nbytes, stream_index):
        self.tensor = tensor
        self.nbytes = nbytes
        self.ptr = tensor.data_ptr()
        self.stream_index = stream_index
        self.used_on = set()  # stream indices it was used on and recorded with record_stream


def overlaps(a_ptr, a_len, b_ptr, b_len):
    return a_ptr < b_ptr + b_len and b_ptr < a_ptr + a_len


class AllocatorMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        torch.vdev.synchronize(DEVICE)
        self.streams = [torch.vdev.default_stream(DEVICE)] + [
            torch.vdev.Stream(device=DEVICE) for _ in range(2)
        ]
        self.gates = {}  # stream index -> closed gate
        self.live = []
        # Freed blocks whose recorded work is held behind a closed gate: (ptr, nbytes, gates).
        self.pending = []
        stats = torch.vdev.memory_stats(DEVICE)
        self.base_requested = stats["requested_bytes.all.current"]
        self.max_current = {}

    def teardown(self):
        for gate in self.gates.values():
            gate.open()
        self.live.clear()
        torch.vdev.synchronize(DEVICE)

    @rule(size=SIZES, stream_index=st.integers(0, 2))
    def allocate(self, size, stream_index):
        with torch.vdev.stream(self.streams[stream_index]):
            t = torch.empty(size, dtype=torch.uint8, device=f"vdev:{DEVICE}")
        new = Live(t, size, stream_index)
        for other in self.live:
            assert not overlaps(new.ptr, size, other.ptr, other.nbytes), "two live tensors overlap"
        for ptr, nbytes, _ in self.pending:
            assert not overlaps(new.ptr, size, ptr, nbytes), (
                "a block was handed out while work recorded against it is pending"
            )
        self.live.append(new)

    @rule(data=st.data())
    @precondition(lambda self: self.live)
    def free(self, data):
        victim = self.live.pop(data.draw(st.integers(0, len(self.live) - 1)))
        held = [self.gates[i] for i in victim.used_on if i in self.gates]
        if held:
            self.pending.append((victim.ptr, victim.nbytes, held))
        del victim.tensor

    @rule(data=st.data(), stream_index=st.integers(0, 2))
    @precondition(lambda self: self.live)
    def use_on_stream(self, data, stream_index):
        target = self.live[data.draw(st.integers(0, len(self.live) - 1))]
        stream = self.streams[stream_index]
        # Ordered after its producer and its earlier users (a race otherwise: the sanitizer's).
        for i in {target.stream_index, *target.used_on}:
            stream.wait_stream(self.streams[i])
        with torch.vdev.stream(stream):
            target.tensor.add_(1)
        target.tensor.record_stream(stream)
        if stream_index != target.stream_index:
            target.used_on.add(stream_index)

    @rule(stream_index=st.integers(1, 2))
    def close_gate(self, stream_index):
        if stream_index not in self.gates:
            gate = rt.Gate()
            rt.enqueue_gate(*sid(self.streams[stream_index]), gate)
            self.gates[stream_index] = gate

    @rule()
    def open_gates(self):
        for gate in self.gates.values():
            gate.open()
        self.gates.clear()
        for s in self.streams:
            s.synchronize()
        self.pending.clear()

    @rule()
    @precondition(lambda self: not self.gates)  # empty_cache waits for the device's work
    def empty_cache(self):
        torch.vdev.empty_cache()
        stats = torch.vdev.memory_stats(DEVICE)
        assert stats["inactive_split.all.current"] >= 0
        assert stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"]

    @invariant()
    def accounting_matches_the_model(self):
        stats = torch.vdev.memory_stats(DEVICE)
        requested = stats["requested_bytes.all.current"]
        assert requested == self.base_requested + sum(t.nbytes for t in self.live)
        assert stats["allocated_bytes.all.current"] >= requested
        assert stats["active_bytes.all.current"] >= stats["allocated_bytes.all.current"]
        assert stats["reserved_bytes.all.current"] >= stats["active_bytes.all.current"]
        assert torch.vdev.mem_get_info(DEVICE)[0] >= 0
        for key, value in stats.items():
            if key.endswith(".current"):
                stem = key[: -len(".current")]
                self.max_current[stem] = max(self.max_current.get(stem, value), value)
                assert stats[stem + ".peak"] >= self.max_current[stem], stem


TestAllocator = AllocatorMachine.TestCase
