"""The libraries' own test harnesses pointed at vdev (torch_vdev.testing) by the plugin."""

from __future__ import annotations

import pytest

from torch_vdev.pytest_plugin.settings import bypass, state_key


def enable(config: pytest.Config) -> None:
    """Points the libraries' harnesses at vdev (torch_vdev.testing), once the hardware is set: an
    adapter may count the devices."""
    state = config.stash[state_key]
    if state.harnesses_enabled:
        return
    state.harnesses_enabled = True
    from torch_vdev import testing

    state.harness_variables = testing.enable()
    late = testing.read_before_set(state.harness_variables)
    if late:
        raise pytest.UsageError(
            f"{'; '.join(late)}. The plugin was loaded after a conftest had imported the harness "
            "(pytest_plugins in a conftest, with PYTEST_DISABLE_PLUGIN_AUTOLOAD set): load it "
            "with -p torch_vdev.pytest_plugin, or set the variable in pytest's environment"
        )
    if bypass(config):
        testing.bypass_device_restrictions()
