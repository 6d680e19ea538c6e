"""Two-sample statistics shared by the distribution tests (test_distributions.py,
test_random_conformance.py)."""

import torch


def ks_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |F_a(x) - F_b(x)| over every value x of either sample (valid for discrete ones too)."""
    a, b = a.double().flatten().sort().values, b.double().flatten().sort().values
    grid = torch.cat([a, b]).unique()
    fa = torch.searchsorted(a, grid, right=True).double() / a.numel()
    fb = torch.searchsorted(b, grid, right=True).double() / b.numel()
    return (fa - fb).abs().max().item()
