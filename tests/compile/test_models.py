"""Real models compiled on vdev (issue 14, items 2 and 3): training steps (forward, backward,
optimizer) and inference of an MLP, a small Transformer and a small CNN match the same steps
run eagerly on vdev; max-autotune-no-cudagraphs, reduce-overhead (vdev graphs, issue 15), dynamic
batch sizes and compiled autograd work.

``VDEV_COMPILE_FULL=1`` adds every model under every mode."""

import copy
import os

import pytest
import torch
import torch.nn as nn

FULL = os.environ.get("VDEV_COMPILE_FULL") == "1"


def mlp():
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 10))
    return model, torch.randn(16, 32)


def transformer():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), torch.randn(4, 6, 32)


def cnn():
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(8 * 4 * 4, 10),
    )  # fmt: skip
    return model, torch.randn(4, 3, 8, 8)


MODELS = {"mlp": mlp, "transformer": transformer, "cnn": cnn}


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # conftest.py


def assert_same_parameters(a: nn.Module, b: nn.Module) -> None:
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(
            p.detach().cpu(), q.detach().cpu(), rtol=1e-3, atol=1e-4, msg=name
        )


def train_and_compare(make, steps=3, **compile_kwargs):
    torch.manual_seed(0)
    model, batch = make()
    eager, compiled = copy.deepcopy(model).to("vdev"), copy.deepcopy(model).to("vdev")
    forward = torch.compile(compiled, **compile_kwargs)
    batch = batch.to("vdev")
    for module, fn in ((eager, eager), (compiled, forward)):
        opt = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
        for _ in range(steps):
            opt.zero_grad()
            fn(batch).square().mean().backward()
            opt.step()
    assert_same_parameters(eager, compiled)
    eager.eval(), compiled.eval()
    with torch.no_grad():
        torch._dynamo.reset()
        torch.testing.assert_close(
            torch.compile(compiled, **compile_kwargs)(batch).cpu(), eager(batch).cpu(),
            rtol=1e-3, atol=1e-4,
        )  # fmt: skip


@pytest.mark.parametrize("name", MODELS)
def test_training_steps_and_inference_match_eager(name):
    train_and_compare(MODELS[name])


@pytest.mark.parametrize("name", list(MODELS) if FULL else ["mlp"])
def test_max_autotune_no_cudagraphs(name):
    train_and_compare(MODELS[name], steps=2, mode="max-autotune-no-cudagraphs")


@pytest.mark.parametrize("name", list(MODELS) if FULL else ["cnn"])
def test_reduce_overhead_replays_vdev_graphs(name, monkeypatch):
    from torch._dynamo.utils import counters

    from torch_vdev.vdev.graphs import VdevGraph

    replays, replay = [], VdevGraph.replay
    monkeypatch.setattr(VdevGraph, "replay", lambda g: replays.append(g) or replay(g))
    counters.clear()
    train_and_compare(MODELS[name], steps=4, mode="reduce-overhead")
    # step 1 warms up; steps 2 to 4 replay the forward and the backward graph
    assert len(replays) == 6 and counters["inductor"]["cudagraph_skips"] == 0


def test_dynamic_batch_sizes_train_without_recompiling():
    torch.manual_seed(0)
    model, _ = mlp()
    eager, compiled = copy.deepcopy(model).to("vdev"), copy.deepcopy(model).to("vdev")
    forward = torch.compile(compiled, dynamic=True)
    for batch_size in (3, 8, 13):
        batch = torch.randn(batch_size, 32, device="vdev")
        for module, fn in ((eager, eager), (compiled, forward)):
            module.zero_grad()
            fn(batch).sum().backward()
        for p, q in zip(eager.parameters(), compiled.parameters(), strict=True):
            torch.testing.assert_close(q.grad.cpu(), p.grad.cpu(), rtol=1e-3, atol=1e-4)


def test_compiled_autograd_backward_matches_eager():
    torch.manual_seed(0)
    model, batch = mlp()
    model, batch = model.to("vdev"), batch.to("vdev")
    model(batch).sum().backward()
    want = [p.grad.cpu().clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    with torch._dynamo.compiled_autograd._enable(torch.compile):
        torch.compile(model)(batch).sum().backward()
    for p, w in zip(model.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad.cpu(), w, rtol=1e-4, atol=1e-5)
