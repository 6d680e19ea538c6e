"""Stand-in for transformers.utils.import_utils' capability probes (see ../../README.md): a
device is asked to do the work, and any exception means "not available"."""

from functools import lru_cache

import torch


@lru_cache
def is_torch_fp16_available_on_device(device: str) -> bool:
    try:
        x = torch.zeros(2, 2, dtype=torch.float16, device=device)
        _ = x @ x
        # As transformers: LayerNorm too, because many models use it.
        embedding = torch.randn(3, 4, 5, dtype=torch.float16, device=device)
        layer_norm = torch.nn.LayerNorm(5, dtype=torch.float16, device=device)
        _ = layer_norm(embedding)
        return True
    except Exception:
        return False


@lru_cache
def is_torch_bf16_available_on_device(device: str) -> bool:
    if device == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        x = torch.zeros(2, 2, dtype=torch.bfloat16, device=device)
        _ = x @ x
        return True
    except Exception:
        return False
