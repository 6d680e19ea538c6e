"""What the compile tests share: a fresh Dynamo for each test of the modules that ask for it
(``pytestmark = pytest.mark.usefixtures("fresh_dynamo")``)."""

import gc

import pytest
import torch
from torch._dynamo.utils import counters
from torch._inductor.cudagraph_trees import MarkStepBox


@pytest.fixture
def fresh_dynamo(monkeypatch):
    """Dynamo's caches and counters reset before and after the test, and the step counter of
    cudagraph trees restored (tests that mark steps change it); compiled functions sit in
    reference cycles holding their graphs' memory, so a collection follows."""
    torch._dynamo.reset()
    counters.clear()
    monkeypatch.setattr(MarkStepBox, "mark_step_counter", 0)
    yield
    torch._dynamo.reset()
    gc.collect()
