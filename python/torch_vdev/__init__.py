"""torch_vdev: simulated asynchronous accelerator devices for PyTorch.

With the package installed, ``import torch`` registers the ``vdev`` device through the
``torch.backends`` entry point (see :mod:`torch_vdev._autoload`). Importing ``torch_vdev``
directly does the same, which is what to do when autoloading is disabled with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``. Registration happens once, whichever import comes first.
"""

import torch  # noqa: F401  (first: torch's libraries must be loaded before torch_vdev._C)

from torch_vdev._registration import register as _register
from torch_vdev._version import VERSION as __version__

_register()

__all__ = ["__version__"]
