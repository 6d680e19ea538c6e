"""The torch releases torch-vdev supports: the one list that the build, the import-time check and
CI read (this file imports nothing, so that the build's metadata provider and ``.ci/run`` can run
it by path without importing torch or torch_vdev).

A build of torch-vdev is pinned to the torch it was compiled against: its C++ library links
libtorch's unversioned symbols, and one release's headers do not describe another's classes (2.14
added a virtual method to ``c10::GeneratorImpl``). A release not listed here is refused at build
time (tools/packaging/vdev_torch_pin.py) rather than half-built.
"""

# Oldest first. Adding a release: docs/torch-releases.md says what to check.
SUPPORTED = ("2.13.0", "2.14.1", "2.15.0")

# The release an isolated build compiles against when the environment it installs into has no
# torch yet (the README's commands on a fresh machine). 2.13.0 and not the newest: measured in
# docs/torch-releases.md (install time; the only CPU-only wheel of the three on this project's
# machines), and the README's full suite runs on it, the other releases run CI's slice.
DEFAULT = "2.13.0"


def public_version(version: str) -> str:
    """The release without its local label: ``2.14.1+cu130`` -> ``2.14.1``. Builds of one
    release for different accelerators (``+cpu``, ``+cu130``) share libtorch's CPU ABI, which is
    all vdev links."""
    return version.split("+", 1)[0]
