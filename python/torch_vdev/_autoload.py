"""Entry point of the ``torch.backends`` group, called by torch at the end of ``import torch``.

This module stays tiny and must not import torch_vdev's other modules at import time: when the
user imports ``torch_vdev`` before ``torch``, torch runs this entry point while the
``torch_vdev`` package itself is still initialising, so everything is done lazily inside
``_autoload()``. Errors are not swallowed: torch reports them with the real cause chained.
"""


def _autoload() -> None:
    from torch_vdev._registration import register

    register()
