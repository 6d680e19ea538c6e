"""torch.use_deterministic_algorithms(True) with fill_uninitialized_memory fills new device memory
as CUDA does (empty, empty_strided and resize_ growth: NaN for floating types, the largest value
for integers)."""

import pytest
import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.complex64]

NEW_MEMORY = {
    "empty": lambda d, dt: torch.empty(3, 2, device=d, dtype=dt),
    "empty_strided": lambda d, dt: torch.empty_strided((2, 3), (1, 2), device=d, dtype=dt),
    "empty_like": lambda d, dt: torch.empty_like(torch.zeros(4, device=d, dtype=dt)),
    "new_empty": lambda d, dt: torch.zeros(1, device=d, dtype=dt).new_empty(5),
    "resize_ growth": lambda d, dt: torch.zeros(2, device=d, dtype=dt).resize_(6),
}


@pytest.fixture
def deterministic():
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before)
    torch.utils.deterministic.fill_uninitialized_memory = True


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(NEW_MEMORY))
def test_new_memory_is_filled_as_on_cuda(deterministic, name, dtype):
    want = NEW_MEMORY[name]("cpu", dtype)
    got = NEW_MEMORY[name]("vdev", dtype)
    assert got.device.type == "vdev"
    bits = lambda t: t.contiguous().view(torch.uint8)  # noqa: E731
    assert torch.equal(bits(got.cpu()), bits(want))  # bit for bit (NaN included)


def test_nothing_is_filled_when_fill_uninitialized_memory_is_off(deterministic):
    torch.utils.deterministic.fill_uninitialized_memory = False
    x = torch.full((1024,), 7.0, device="vdev")
    del x  # its block returns to the cache and is handed out again unfilled
    y = torch.empty(1024, device="vdev")
    assert torch.equal(y.cpu(), torch.full((1024,), 7.0))
