"""Random-number control for ``torch.vdev``.

vdev has no generator of its own yet: random operators on vdev tensors run on the host in call
order and draw from the CPU default generator. Seeding vdev therefore seeds that generator, which
makes ``torch.manual_seed`` (which calls ``torch.vdev.manual_seed_all``) and
``torch.vdev.manual_seed`` reproducible for vdev random operators.
"""

import torch


def manual_seed(seed: int) -> None:
    """Seeds the generator that vdev random operators draw from (the CPU default generator)."""
    torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """As :func:`manual_seed`: all vdev devices share one generator."""
    manual_seed(seed)
