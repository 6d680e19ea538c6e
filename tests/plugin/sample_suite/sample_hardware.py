"""Reports the simulated hardware the tests see, for --vdev-devices and --vdev-memory. Run by
tests/plugin/test_pytest_plugin.py in a nested pytest, which names the report file."""

import json
import os

import torch


def test_reports_the_hardware():
    count = torch.vdev.device_count()
    report = {
        "device_count": count,
        "total_memory": [torch.vdev.mem_get_info(d)[1] for d in range(count)],
    }
    with open(os.environ["VDEV_PLUGIN_REPORT"], "w") as f:
        json.dump(report, f)
