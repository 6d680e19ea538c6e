"""Nested tensors (torch.nested, strided layout) on vdev, as on CPU and CUDA.

PyTorch's own modules take nested-tensor fast paths for PrivateUse1 devices
(nn.TransformerEncoder in evaluation with a padding mask), so a vdev program meets them without
asking for them. vdev runs nested operators on host copies with CPU's kernels (synchronously),
and ATen's device-generic nested view kernels on the device tensors themselves
(backend/ops/nested_tensors.cpp).
"""

import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")

PARTS = [torch.randn(2, 3), torch.randn(4, 3)]


def nested(device, parts=PARTS, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([p.to(device) for p in parts], device=device, **kwargs)


def test_transformer_encoder_fast_path_with_a_padding_mask_equals_cpu():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x = torch.randn(4, 10, 32)
    mask = torch.zeros(4, 10, dtype=torch.bool)
    mask[:, 8:] = True
    mask[1, 5:] = True
    with torch.no_grad():
        want = model(x, src_key_padding_mask=mask)
        got = copy.deepcopy(model).to("vdev")(x.to("vdev"), src_key_padding_mask=mask.to("vdev"))
    assert got.device.type == "vdev"
    torch.testing.assert_close(got.cpu(), want, atol=0, rtol=0)  # CPU's kernels, bit for bit


OPERATIONS = {
    "arithmetic": lambda v: (v * 2 + v).to_padded_tensor(-1),
    "activations": lambda v: F.gelu(v.relu()).to_padded_tensor(0),
    "softmax": lambda v: F.softmax(v, -1).to_padded_tensor(0),
    "linear": lambda v: F.linear(v, torch.ones(5, 3, device=v.device)).to_padded_tensor(0),
    "bmm": lambda v: torch.bmm(v, v.transpose(1, 2)).to_padded_tensor(0),
    "sum keepdim": lambda v: v.sum(-1, keepdim=True).to_padded_tensor(0),
    "clone": lambda v: v.clone().to_padded_tensor(0),
    "sdpa": lambda v: F.scaled_dot_product_attention(
        v.unsqueeze(1), v.unsqueeze(1), v.unsqueeze(1)
    ).to_padded_tensor(0),
    "transpose": lambda v: v.transpose(1, 2).contiguous().to_padded_tensor(0),
    "select": lambda v: v.select(0, 1),
    "unsqueeze": lambda v: v.unsqueeze(1).to_padded_tensor(0),
    "view": lambda v: v.view(2, -1, 3).to_padded_tensor(0),
    "unbind": lambda v: torch.stack([t.sum() for t in v.unbind()]),
    "narrow of a non-contiguous result": lambda v: v.narrow(0, 1, 1).to_padded_tensor(0),
    "chunk along dim 0": lambda v: v.chunk(2)[1],
    "layer_norm without weights": lambda v: F.layer_norm(v, (3,)),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_nested_operators_compute_or_raise_as_on_cpu(name):
    op = OPERATIONS[name]
    try:
        want, cpu_error = op(nested("cpu")), None
    except (RuntimeError, ValueError) as e:
        want, cpu_error = None, e
    if cpu_error is not None:
        with pytest.raises(type(cpu_error), match=str(cpu_error)[:40]):
            op(nested("vdev"))
        return
    got = op(nested("vdev"))
    assert got.device.type == "vdev"
    torch.testing.assert_close(got.cpu(), want)


def test_views_of_a_nested_tensor_write_through_to_its_device_memory():
    v = nested("vdev")
    first, second = v.unbind()
    assert first.device.type == "vdev"
    first.add_(100)
    v.select(0, 1).mul_(0)
    padded = v.to_padded_tensor(0).cpu()
    torch.testing.assert_close(padded[0, :2], PARTS[0] + 100)
    assert torch.equal(padded[1], torch.zeros(4, 3))


def test_autograd_through_nested_operators_equals_cpu():
    def run(device):
        torch.manual_seed(0)
        linear = nn.Linear(3, 5).to(device)
        x = nested(device, requires_grad=True)
        out = F.gelu(linear(x)).to_padded_tensor(0)
        out.sum().backward()
        return out, x.grad.to_padded_tensor(0), linear.weight.grad

    for got, want in zip(run("vdev"), run("cpu"), strict=True):
        assert got.device.type == "vdev"
        torch.testing.assert_close(got.detach().cpu(), want)


def test_moves_between_devices_and_dtypes_keep_the_nested_structure():
    v = nested("vdev")
    assert v.is_nested and v.device == torch.device("vdev", 0)
    for moved in (v.cpu(), v.to("vdev:1").cpu(), v.to(torch.float64).cpu().float()):
        torch.testing.assert_close(moved.to_padded_tensor(0), nested("cpu").to_padded_tensor(0))
    assert v.to(torch.float64).dtype == torch.float64


def test_mixed_devices_raise_cudas_error():
    v = nested("vdev")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        F.linear(v, torch.ones(5, 3))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        v + nested("cpu")


def test_nested_operators_synchronize_and_say_so():
    # They run on host copies: the sync debug mode names them (CUDA would queue them).
    v = nested("vdev")
    torch.vdev.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="called a synchronizing vdev operation: aten::"):
            v * 2
        v.unbind()  # views are metadata kernels: no host copy, no wait
    finally:
        torch.vdev.set_sync_debug_mode("default")
