"""For the plugin registered (entry point) but not enabled: it must not have used vdev. Read when
this file is collected, after every plugin was loaded and configured, and before the other sample
files (collected in name order) use the device themselves: vdev's runtime has not read its
configuration yet (it does at the first device use)."""

import sys

_C = sys.modules.get("torch_vdev._C")
VDEV_USED_BEFORE_COLLECTION = _C is not None and _C._config_read()


def test_vdev_is_not_used():
    assert not VDEV_USED_BEFORE_COLLECTION
