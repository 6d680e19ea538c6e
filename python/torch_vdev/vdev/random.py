"""Random-number control for ``torch.vdev``, with ``torch.cuda.random``'s names and semantics.

Each vdev device has a default generator (``torch.vdev.default_generators``), and
``torch.Generator(device="vdev:N")`` makes more. A generator is counter based, like CUDA's Philox
generator: its state is (seed, offset), a 16-byte CPU ``torch.uint8`` tensor (the seed, then the
offset, as CUDA's). A random operator reserves its offset range when it is queued and is computed
from (seed, offset) alone, so its values never depend on the stream that runs it or on timing, and
drawing on one device never changes another's numbers (``cpp/backend/random/``).

Differences from ``torch.cuda``, on purpose: vdev generators exist before the device is
initialised, so the seeding and ``set_rng_state`` functions apply at once instead of being queued
until initialisation (the observable result is the same); none of them initialises the device.
A state of the wrong dtype is a ``TypeError`` and one of the wrong size a ``ValueError`` naming
the size (CUDA: ``RuntimeError: RNG state is wrong size``); either leaves the state unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import torch

from torch_vdev import _C
from torch_vdev.vdev._utils import _get_device_index

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
]

_lock = threading.Lock()
_generators: tuple[torch.Generator, ...] = ()


def _default_generators() -> tuple[torch.Generator, ...]:
    """The ``torch.Generator`` objects of every device's default generator, made once."""
    global _generators
    if not _generators:
        with _lock:
            if not _generators:
                count = _C._get_device_count()  # a malformed configuration raises here
                _generators = tuple(_C._default_generator(i) for i in range(count))
    return _generators


def _generator(device: Any, fn: str) -> torch.Generator:
    gens = _default_generators()
    index = _get_device_index(device, optional=True, fn=fn)
    if not 0 <= index < len(gens):
        raise IndexError(
            f"[{fn}] device index {index} out of range: {len(gens)} vdev devices "
            f"(0..{len(gens) - 1})"
        )
    return gens[index]


def get_rng_state(device: Any = "vdev") -> torch.Tensor:
    """Returns the state of ``device``'s default generator (default: the current device) as a
    16-byte CPU ``torch.uint8`` tensor. Initialises vdev, as ``torch.cuda.get_rng_state``."""
    from torch_vdev.vdev import _lazy_init

    _lazy_init()
    return _generator(device, "get_rng_state").get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    """Returns the states of every device's default generator."""
    return [get_rng_state(i) for i in range(len(_default_generators()))]


def set_rng_state(new_state: torch.Tensor, device: Any = "vdev") -> None:
    """Sets the state of ``device``'s default generator (default: the current device).

    ``new_state`` is a CPU ``torch.uint8`` tensor of 16 bytes (seed, offset) or 8 bytes (a seed,
    offset 0), as returned by :func:`get_rng_state`. A tensor of another dtype raises
    ``TypeError``, one of another size ``ValueError``; the state is then unchanged.
    """
    if not isinstance(new_state, torch.Tensor):
        raise TypeError(
            f"set_rng_state: expected a CPU torch.uint8 tensor, got {type(new_state).__name__}"
        )
    _generator(device, "set_rng_state").set_state(new_state)


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """Sets the state of every device's default generator, device 0 first. Every state is checked
    before any is set, so a bad one changes nothing."""
    states = list(new_states)
    saved = get_rng_state_all()
    try:
        for i, state in enumerate(states):
            set_rng_state(state, i)
    except Exception:
        for i, state in enumerate(saved):
            set_rng_state(state, i)
        raise


def manual_seed(seed: int) -> None:
    """Seeds the default generator of the current device (offset 0)."""
    seed = int(seed)
    _generator(None, "manual_seed").manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seeds the default generator of every device. ``torch.manual_seed`` calls it."""
    seed = int(seed)
    for gen in _default_generators():
        gen.manual_seed(seed)


def seed() -> None:
    """Seeds the current device's default generator with a nondeterministic number."""
    _generator(None, "seed").seed()


def seed_all() -> None:
    """Seeds every device's default generator with one nondeterministic number."""
    gens = _default_generators()
    if gens:
        gens[0].seed()
        for gen in gens[1:]:
            gen.manual_seed(gens[0].initial_seed())


def initial_seed() -> int:
    """Returns the seed of the current device's default generator. Initialises vdev, as
    ``torch.cuda.initial_seed``."""
    from torch_vdev.vdev import _lazy_init

    _lazy_init()
    return _generator(None, "initial_seed").initial_seed()
