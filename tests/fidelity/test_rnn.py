"""nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell on vdev, through the fused cells ATen chooses for a
non-CPU device (cpp/backend/ops/rnn_cells.cpp): outputs, states and gradients equal to CPU's, the
differentiable backward under create_graph, and the cells queued like every operator."""

import copy

import pytest
import torch
import torch.nn as nn
from asyncutil import gated, run_bounded, sid, wait_until_blocked

from torch_vdev import _testing as rt

MODULES = {
    "lstm 2 layers bidirectional batch_first": lambda: nn.LSTM(
        5, 7, num_layers=2, bidirectional=True, batch_first=True
    ),
    "lstm without bias": lambda: nn.LSTM(5, 7, bias=False),
    "lstm with projections": lambda: nn.LSTM(5, 7, proj_size=3),
    "gru 2 layers": lambda: nn.GRU(5, 7, num_layers=2),
    "gru bidirectional without bias": lambda: nn.GRU(5, 7, bias=False, bidirectional=True),
    "lstm cell": lambda: nn.LSTMCell(5, 7),
    "gru cell": lambda: nn.GRUCell(5, 7),
    "gru cell without bias": lambda: nn.GRUCell(5, 7, bias=False),
}


def _flat(out):
    items = out if isinstance(out, tuple) else (out,)
    return [t for item in items for t in (item if isinstance(item, tuple) else (item,))]


@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize("with_state", [False, True])
def test_outputs_and_gradients_equal_cpus(name, with_state):
    torch.manual_seed(0)
    ref = MODULES[name]().double()
    moved = copy.deepcopy(ref).to("vdev")
    cell = isinstance(ref, nn.RNNCellBase)
    x = torch.randn((4, 5) if cell else (3, 4, 5), dtype=torch.double)
    state = None
    if with_state:
        layers = 1 if cell else ref.num_layers * (2 if ref.bidirectional else 1)
        h_size = getattr(ref, "proj_size", 0) or ref.hidden_size
        batch = 4 if cell else x.shape[0 if ref.batch_first else 1]
        shape = (batch, h_size) if cell else (layers, batch, h_size)
        c_shape = (batch, ref.hidden_size) if cell else (layers, batch, ref.hidden_size)
        h = torch.randn(shape, dtype=torch.double)
        c = torch.randn(c_shape, dtype=torch.double)
        state = (h, c) if isinstance(ref, (nn.LSTM, nn.LSTMCell)) else h

    def run(module, dev):
        xd = x.detach().to(dev).requires_grad_()
        sd = None if state is None else tuple(s.to(dev) for s in state) if isinstance(
            state, tuple) else state.to(dev)  # fmt: skip
        outs = _flat(module(xd) if sd is None else module(xd, sd))
        sum((o * (i + 1)).sum() for i, o in enumerate(outs)).backward()
        return outs, xd.grad, [p.grad for p in module.parameters()]

    want, got = run(ref, "cpu"), run(moved, "vdev")
    for a, b in zip(want[0] + [want[1]] + want[2], got[0] + [got[1]] + got[2],
                    strict=True):  # fmt: skip
        assert b.device.type == "vdev"
        torch.testing.assert_close(b.cpu(), a)


@pytest.mark.parametrize("cell_type", [nn.LSTMCell, nn.GRUCell])
def test_second_order_gradients_through_the_differentiable_backward(cell_type):
    torch.manual_seed(1)
    cell = cell_type(3, 4).double().to("vdev")
    x = torch.randn(2, 3, dtype=torch.double, device="vdev", requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda inp: _flat(cell(inp))[0], (x,))


@pytest.mark.parametrize("cell_type", [nn.LSTMCell, nn.GRUCell])
def test_a_cell_is_queued_not_synchronized(cell_type):
    cell = cell_type(3, 4).to("vdev")
    x = torch.randn(2, 3, device="vdev")
    stream = torch.vdev.current_stream()
    out = []
    with gated(stream) as gate:
        wait_until_blocked(gate)
        assert run_bounded(lambda: out.append(_flat(cell(x))[0].sum().backward())), "synchronized"
        assert not rt.stream_query(*sid(stream))
    torch.vdev.synchronize()
    assert all(torch.isfinite(p.grad.cpu()).all() for p in cell.parameters())


def test_a_cell_with_gates_of_the_wrong_size_raises():
    gates = torch.randn(2, 8, device="vdev")
    with pytest.raises(RuntimeError, match="expected the previous state of size"):
        torch.ops.aten._thnn_fused_lstm_cell(gates, gates, torch.randn(2, 3, device="vdev"))
    with pytest.raises(RuntimeError, match="expected hidden_gates of size"):
        torch.ops.aten._thnn_fused_gru_cell(
            gates[:, :6], gates[:1, :6], torch.randn(2, 2, device="vdev")
        )
