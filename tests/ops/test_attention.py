"""scaled_dot_product_attention on vdev takes the fused kernel CPU's choice names
(cpp/backend/ops/attention_choice.cpp), so its values are CPU's, forward and backward."""

import pytest
import torch
import torch.nn.functional as F

MASKS = {
    "none": lambda: {},
    "causal": lambda: {"is_causal": True},
    "float_mask": lambda: {"attn_mask": torch.randn(16, 16)},
    "bool_mask": lambda: {"attn_mask": torch.rand(16, 16) > 0.3},
}


def _on(device, kwargs):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_attention_equals_cpus_forward_and_backward(mask, dtype):
    kwargs = MASKS[mask]()
    cpu = [torch.randn(2, 3, 16, 8, dtype=dtype, requires_grad=True) for _ in range(3)]
    dev = [t.detach().to("vdev").requires_grad_() for t in cpu]
    want = F.scaled_dot_product_attention(*cpu, **kwargs)
    got = F.scaled_dot_product_attention(*dev, **_on("vdev", kwargs))
    grad = torch.randn_like(want)
    want.backward(grad)
    got.backward(grad.to("vdev"))
    assert torch.equal(got.cpu(), want)  # the same kernel on the same bytes
    for c, d in zip(cpu, dev, strict=True):
        assert torch.equal(d.grad.cpu(), c.grad)


def test_attention_with_dropout_draws_from_the_device_generator():
    # The fused CPU kernel would draw from the CPU generator; with dropout the math path runs,
    # whose dropout is keyed by the device's generator.
    q = torch.randn(2, 3, 16, 8, device="vdev")
    draws = []
    for _ in range(2):
        torch.vdev.manual_seed(7)
        torch.default_generator.manual_seed(len(draws))  # the CPU generator must not matter
        draws.append(F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).cpu())
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[0], F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).cpu())
