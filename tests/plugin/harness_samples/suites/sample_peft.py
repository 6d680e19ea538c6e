"""A test file in PEFT's style: its tests/testing_utils.py takes the device from accelerate's
get_backend() at import and defines pytest marks from it; PEFT's infer_device() names the device
its examples use. Run by tests/plugin/test_harness_adapters.py in a nested pytest."""

import pytest
import torch
from accelerate.test_utils.testing import get_backend
from peft.utils import infer_device
from safetensors.torch import load_file as safe_load_file  # as PEFT's save_and_load imports it
from safetensors.torch import save_file

torch_device, device_count, memory_allocated_func = get_backend()

require_non_cpu = pytest.mark.skipif(
    torch_device == "cpu", reason="test requires a hardware accelerator"
)
require_torch_multi_accelerator = pytest.mark.skipif(
    (torch_device == "cpu") or (device_count < 2), reason="test requires multiple accelerators"
)


@require_non_cpu
def test_a_low_rank_update_on_the_accelerator():
    base = torch.nn.Linear(16, 16).to(torch_device)
    lora_a = torch.zeros(4, 16, device=torch_device)
    lora_b = torch.randn(16, 4, device=torch_device)
    x = torch.randn(2, 16, device=torch_device)
    torch.testing.assert_close(base(x) + x @ lora_a.T @ lora_b.T, base(x))


@require_torch_multi_accelerator
def test_a_model_split_over_two_devices():
    first = torch.nn.Linear(8, 8).to(f"{torch_device}:0")
    second = torch.nn.Linear(8, 8).to(f"{torch_device}:1")
    out = second(first(torch.randn(2, 8, device=f"{torch_device}:0")).to(f"{torch_device}:1"))
    assert out.device == torch.device(f"{torch_device}:1")


def test_infer_device_names_the_accelerator():
    assert infer_device() == torch_device


@require_non_cpu
def test_an_adapter_saved_and_loaded_to_the_device(tmp_path):
    weights = {"lora_A": torch.randn(4, 16, device=torch_device)}
    save_file(weights, str(tmp_path / "adapter_model.safetensors"))
    loaded = safe_load_file(str(tmp_path / "adapter_model.safetensors"), device=infer_device())
    assert loaded["lora_A"].device.type == torch_device
    torch.testing.assert_close(loaded["lora_A"], weights["lora_A"])
