"""torch.amp.GradScaler("vdev") behaves as on CUDA: a step whose gradients hold an inf or a NaN is
skipped (parameters unchanged) and backs the scale off, a clean step updates the parameters with
the unscaled gradients, and the scale grows after growth_interval clean steps, so a training run's
scale follows its overflow schedule exactly. scale(), backward, unscale_() and update() are queued
on the current stream like any operator (only step() reads found_inf on the host, where CUDA
synchronizes too), and the two AMP kernels compute what CPU computes."""

import math

import pytest
import torch
import torch.nn.functional as F
from asyncutil import gated, run_bounded, sid, wait_until_blocked

from torch_vdev import _testing as rt

INJECT = {
    "inf": lambda g: g.mul_(float("inf")),  # every element non-finite (0 * inf is NaN)
    "-inf": lambda g: g.view(-1)[0].fill_(float("-inf")),  # a single element
    "nan": lambda g: g.view(-1)[-1].fill_(float("nan")),
}


def make_run(seed=0, lr=0.05):
    """A small MLP on vdev, its SGD optimizer and a batch, all fixed by `seed`."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(
        "vdev"
    )
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = torch.randn(32, 8, device="vdev"), torch.randn(32, 1, device="vdev")
    return model, opt, x, y


def forward(model, x, y):
    with torch.autocast("vdev"):
        return F.mse_loss(model(x), y)


def snapshot(model):
    return [p.detach().clone() for p in model.parameters()]


def unchanged(model, before):
    return all(
        torch.equal(p.detach().cpu(), b.cpu())
        for p, b in zip(model.parameters(), before, strict=True)
    )


# The 20-step run: the steps whose gradients get an overflow, and how.
STEPS = 20
OVERFLOWS = {3: "inf", 7: "nan", 8: "-inf", 15: "inf"}
INIT_SCALE, GROWTH, BACKOFF, INTERVAL = 2.0**10, 2.0, 0.5, 4


def expected_scales():
    """The scale after each step of the schedule, by GradScaler's documented rule: an overflow
    multiplies it by BACKOFF and restarts the count of clean steps; INTERVAL consecutive clean
    steps multiply it by GROWTH and restart the count."""
    scale, clean, out = INIT_SCALE, 0, []
    for step in range(STEPS):
        if step in OVERFLOWS:
            scale, clean = scale * BACKOFF, 0
        else:
            clean += 1
            if clean == INTERVAL:
                scale, clean = scale * GROWTH, 0
        out.append(scale)
    return out


def growth_events():
    """Each maximal run of n clean steps grows the scale n // INTERVAL times."""
    runs, n = [], 0
    for step in range(STEPS):
        if step in OVERFLOWS:
            runs.append(n)
            n = 0
        else:
            n += 1
    runs.append(n)
    return sum(r // INTERVAL for r in runs)


def test_a_training_run_skips_exactly_the_overflowing_steps_and_follows_the_scale_schedule():
    model, opt, x, y = make_run()
    scaler = torch.amp.GradScaler(
        "vdev",
        init_scale=INIT_SCALE,
        growth_factor=GROWTH,
        backoff_factor=BACKOFF,
        growth_interval=INTERVAL,
    )
    losses, skipped, scales = [], [], []
    for step in range(STEPS):
        opt.zero_grad()
        loss = forward(model, x, y)
        losses.append(loss.detach())
        scaler.scale(loss).backward()
        if step in OVERFLOWS:
            INJECT[OVERFLOWS[step]](model[0].weight.grad)
        before = snapshot(model)
        scaler.step(opt)
        scaler.update()
        if unchanged(model, before):
            skipped.append(step)
        scales.append(scaler.get_scale())

    assert all(math.isfinite(v.item()) for v in losses)
    assert losses[-1].item() < losses[0].item()  # the clean steps trained the model
    assert len(skipped) == len(OVERFLOWS)
    assert skipped == sorted(OVERFLOWS)
    assert scales == expected_scales()
    assert growth_events() == 2  # clean runs 0-2, 4-6, 9-14, 16-19: growth at steps 12 and 19
    assert scaler.get_scale() == INIT_SCALE * BACKOFF ** len(OVERFLOWS) * GROWTH ** growth_events()
    assert all(torch.isfinite(p.detach().cpu()).all() for p in model.parameters())


@pytest.mark.parametrize("bad", sorted(INJECT))
def test_a_non_finite_step_is_skipped_and_a_clean_step_updates_the_parameters(bad):
    lr = 0.05
    model, opt, x, y = make_run(lr=lr)
    scaler = torch.amp.GradScaler("vdev", init_scale=INIT_SCALE)

    scaler.scale(forward(model, x, y)).backward()
    INJECT[bad](model[2].weight.grad)
    before = snapshot(model)
    scaler.step(opt)
    scaler.update()
    assert unchanged(model, before)
    assert scaler.get_scale() == INIT_SCALE * 0.5

    opt.zero_grad()
    scaler.scale(forward(model, x, y)).backward()
    before = snapshot(model)
    scaler.step(opt)  # unscales the gradients in place, then SGD: p -= lr * grad
    scaler.update()
    assert not unchanged(model, before)
    for p, b in zip(model.parameters(), before, strict=True):
        assert torch.isfinite(p.grad.cpu()).all()
        torch.testing.assert_close(p.detach().cpu(), (b - lr * p.grad).cpu())
    assert scaler.get_scale() == INIT_SCALE * 0.5  # one clean step: far from growth_interval


def test_scale_backward_unscale_and_update_are_queued():
    # Reference: the same iteration with nothing blocking the stream.
    model, opt, x, y = make_run()
    scaler = torch.amp.GradScaler("vdev", init_scale=INIT_SCALE, growth_interval=1)
    ref_loss = forward(model, x, y)
    scaler.scale(ref_loss).backward()
    scaler.unscale_(opt)
    ref_grads = [p.grad.cpu() for p in model.parameters()]

    model, opt, x, y = make_run()
    scaler = torch.amp.GradScaler("vdev", init_scale=INIT_SCALE, growth_interval=1)
    stream = torch.vdev.current_stream()
    out = {}

    def iteration():
        out["loss"] = forward(model, x, y)
        out["scaled"] = scaler.scale(out["loss"])
        out["scaled"].backward()
        scaler.unscale_(opt)

    with gated(stream) as gate:
        wait_until_blocked(gate)
        assert run_bounded(iteration), "scale, backward or unscale_ synchronized"
        assert not rt.stream_query(*sid(stream))  # the iteration is behind the gate
    torch.vdev.synchronize()
    assert out["scaled"].item() == out["loss"].item() * INIT_SCALE
    assert out["loss"].item() == ref_loss.item()
    for p, r in zip(model.parameters(), ref_grads, strict=True):
        assert torch.equal(p.grad.cpu(), r)
    found = scaler._found_inf_per_device(opt)
    assert [f.item() for f in found.values()] == [0.0]

    before = snapshot(model)
    scaler.step(opt)  # reads found_inf on the host, as on CUDA
    assert not unchanged(model, before)
    with gated(stream) as gate:
        wait_until_blocked(gate)
        assert run_bounded(scaler.update), "update synchronized"
        assert not rt.stream_query(*sid(stream))
    torch.vdev.synchronize()
    assert scaler.get_scale() == INIT_SCALE * 2.0  # growth_interval=1: one clean step grows it


@pytest.mark.parametrize(
    ("found_inf", "tracker", "scale", "new_tracker"),
    [
        (0.0, 0, 1024.0, 1),  # clean, below the interval: count it
        (0.0, 2, 2048.0, 0),  # clean, reaching the interval (3): grow, restart the count
        (1.0, 2, 512.0, 0),  # overflow: back off, restart the count
    ],
    ids=["clean", "growth", "overflow"],
)
def test_amp_update_scale_is_queued_and_matches_cpu(found_inf, tracker, scale, new_tracker):
    def args(device):
        return (
            torch.full((), 1024.0, device=device),
            torch.full((), tracker, dtype=torch.int32, device=device),
            torch.full((), found_inf, device=device),
        )

    cpu = args("cpu")
    torch._amp_update_scale_(*cpu, 2.0, 0.5, 3)
    dev = args("vdev")
    stream = torch.vdev.current_stream()
    with gated(stream) as gate:
        wait_until_blocked(gate)
        assert run_bounded(lambda: torch._amp_update_scale_(*dev, 2.0, 0.5, 3))
        assert not rt.stream_query(*sid(stream))
    torch.vdev.synchronize()
    assert (cpu[0].item(), cpu[1].item()) == (scale, new_tracker)
    for d, c in zip(dev, cpu, strict=True):
        assert d.dtype == c.dtype and torch.equal(d.cpu(), c)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("bad", ["finite", *sorted(INJECT)])
def test_amp_non_finite_check_and_unscale_is_queued_and_matches_cpu(dtype, bad):
    torch.manual_seed(0)
    grads = [torch.randn(5) * 100, torch.randn(3, 4) * 100]
    if bad != "finite":
        INJECT[bad](grads[1])
    grads = [g.to(dtype) for g in grads]

    def args(device):
        return (
            [g.to(device, copy=True) for g in grads],
            torch.zeros((), device=device),
            torch.full((), 1.0 / 1024, device=device),
        )

    cpu = args("cpu")
    torch._amp_foreach_non_finite_check_and_unscale_(*cpu)
    dev = args("vdev")
    stream = torch.vdev.current_stream()
    with gated(stream) as gate:
        wait_until_blocked(gate)
        assert run_bounded(lambda: torch._amp_foreach_non_finite_check_and_unscale_(*dev))
        assert not rt.stream_query(*sid(stream))
    torch.vdev.synchronize()
    assert cpu[1].item() == (0.0 if bad == "finite" else 1.0)
    assert torch.equal(dev[1].cpu(), cpu[1])
    for d, c in zip(dev[0], cpu[0], strict=True):
        assert d.dtype == dtype
        torch.testing.assert_close(d.cpu(), c, rtol=0, atol=0, equal_nan=True)
