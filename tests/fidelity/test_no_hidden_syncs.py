"""Training and inference steps of common models never make the host wait where CUDA would not.

Run with torch.vdev.set_sync_debug_mode("error") (tests/streams/test_sync_debug.py): any operator
that still runs synchronously on the host, or any hidden blocking copy, raises and names itself.
Models are built and moved before the mode is set (a blocking host -> device copy synchronizes on
CUDA too); only the steps run under it.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

DEV = "vdev"


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.1),
        nn.Linear(16, 10),
    )


def training_step(model, optimizer, x, target, loss_fn):
    optimizer.zero_grad()
    loss_fn(model(x), target).backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def cnn_steps(optimizer_factory):
    model = small_cnn().to(DEV)
    optimizer = optimizer_factory(model.parameters())
    x = torch.randn(4, 3, 8, 8, device=DEV)
    y = torch.randint(0, 10, (4,), device=DEV)
    return lambda: training_step(model, optimizer, x, y, F.cross_entropy)


def cnn_inference(dtype):
    model = small_cnn().to(DEV, dtype).eval()
    x = torch.randn(4, 3, 8, 8, device=DEV, dtype=dtype)

    def step():
        with torch.no_grad():
            model(x)

    return step


def transformer_step():
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2)
    model = model.to(DEV)
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(2, 5, 16, device=DEV)
    return lambda: training_step(model, optimizer, x, x, lambda out, t: F.mse_loss(out, t))


def recurrent_steps():
    lstm = nn.LSTM(8, 16, 2, batch_first=True).to(DEV)
    gru = nn.GRUCell(8, 16).to(DEV)
    x = torch.randn(2, 3, 8, device=DEV)

    def step():
        lstm(x)[0].sum().backward()
        gru(x[:, 0]).sum().backward()

    return step


def embedding_steps():
    bag = nn.EmbeddingBag(20, 8, mode="mean").to(DEV)
    table = nn.Embedding(20, 8, padding_idx=0).to(DEV)
    norm = nn.LayerNorm(8).to(DEV)
    idx = torch.randint(0, 20, (3, 4), device=DEV)

    def step():
        (norm(bag(idx)).sum() + table(idx).sum()).backward()

    return step


def autocast_step():
    model = small_cnn().to(DEV)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 3, 8, 8, device=DEV)
    y = torch.randint(0, 10, (4,), device=DEV)

    def step():
        with torch.autocast(DEV, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        optimizer.step()

    return step


WORKLOADS = {
    "cnn training, SGD momentum": lambda: cnn_steps(lambda p: torch.optim.SGD(p, 0.1, 0.9)),
    "cnn training, Adam foreach": lambda: cnn_steps(lambda p: torch.optim.Adam(p, foreach=True)),
    "cnn training, Adam fused": lambda: cnn_steps(lambda p: torch.optim.Adam(p, fused=True)),
    "cnn training, AdamW for-loop": lambda: cnn_steps(
        lambda p: torch.optim.AdamW(p, foreach=False)
    ),
    "cnn inference, float32": lambda: cnn_inference(torch.float32),
    "cnn inference, float16 batch norm": lambda: cnn_inference(torch.float16),
    "cnn inference, bfloat16 batch norm": lambda: cnn_inference(torch.bfloat16),
    "transformer training": transformer_step,
    "lstm and gru cell": recurrent_steps,
    "embedding bag, embedding, layer norm": embedding_steps,
    "autocast bfloat16 training": autocast_step,
}


@pytest.fixture(autouse=True)
def default_mode_after():
    yield
    torch.vdev.set_sync_debug_mode("default")


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_a_model_step_never_waits_for_the_device(name):
    step = WORKLOADS[name]()
    torch.vdev.set_sync_debug_mode("error")
    step()  # the first step plans every operator
    step()
    torch.vdev.set_sync_debug_mode("default")
    torch.vdev.synchronize()
