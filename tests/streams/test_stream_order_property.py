"""Hypothesis: random programs of enqueue / record / wait on several streams and devices are
executed, then checked against the happens-before order they define (vector clocks)."""

import pytest
import torch
from asyncutil import gated, log_on
from hypothesis import given
from hypothesis import strategies as st

from torch_vdev import _testing as rt

STREAMS = [(0, 0), (0, 1), (1, 0), (1, 1)]  # (device, k): two streams per device
N_EVENTS = 3

op = st.one_of(
    st.tuples(st.just("log"), st.integers(0, len(STREAMS) - 1)),
    st.tuples(st.just("record"), st.integers(0, len(STREAMS) - 1), st.integers(0, N_EVENTS - 1)),
    st.tuples(st.just("wait"), st.integers(0, len(STREAMS) - 1), st.integers(0, N_EVENTS - 1)),
)


@given(program=st.lists(op, min_size=1, max_size=40))
def test_execution_respects_happens_before(program):
    streams = [torch.vdev.Stream(dev) for dev, _ in STREAMS]
    events = [torch.vdev.Event() for _ in range(N_EVENTS)]
    log = rt.Log()
    # Model: a vector clock per stream and per event (latest record); each log entry keeps the
    # clock of its stream at that point.
    stream_vc = [[0] * len(STREAMS) for _ in STREAMS]
    event_vc = [None] * N_EVENTS
    event_dev = [None] * N_EVENTS
    entries = {}  # log value -> (stream index, clock)
    with gated(streams[0]), gated(streams[1]), gated(streams[2]), gated(streams[3]):
        for step in program:
            kind, s = step[0], step[1]
            if kind == "log":
                stream_vc[s][s] += 1
                value = len(entries)
                entries[value] = (s, list(stream_vc[s]))
                log_on(streams[s], log, value)
            elif kind == "record":
                e, dev = step[2], STREAMS[s][0]
                if event_dev[e] is not None and event_dev[e] != dev:
                    with pytest.raises(ValueError, match="cannot be recorded on a stream of"):
                        events[e].record(streams[s])
                    continue
                events[e].record(streams[s])
                event_vc[e], event_dev[e] = list(stream_vc[s]), dev
            else:
                e = step[2]
                streams[s].wait_event(events[e])
                if event_vc[e] is not None:
                    stream_vc[s] = [
                        max(a, b) for a, b in zip(stream_vc[s], event_vc[e], strict=True)
                    ]
    for dev in (0, 1):
        torch.vdev.synchronize(dev)
    order = log.values()
    assert sorted(order) == sorted(entries)  # nothing lost, nothing twice
    position = {v: i for i, v in enumerate(order)}
    for a, (sa, vca) in entries.items():
        for b, (_, vcb) in entries.items():
            if a != b and vca[sa] <= vcb[sa]:  # a happens before b
                assert position[a] < position[b], (a, b, program)
    assert all(s.query() for s in streams) and all(e.query() for e in events)
