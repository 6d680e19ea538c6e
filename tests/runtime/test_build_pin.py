"""tools/packaging/vdev_torch_pin.py: which torch a build compiles against and pins its wheel to."""

import importlib.util
import sysconfig
from pathlib import Path

import pytest

from torch_vdev._compat.releases import DEFAULT, SUPPORTED

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pin():
    spec = importlib.util.spec_from_file_location(
        "vdev_torch_pin", ROOT / "tools/packaging/vdev_torch_pin.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def site_with_torch(tmp_path, version):
    """A site-packages folder holding only torch's metadata at `version`."""
    info = tmp_path / f"torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    return tmp_path


def test_supported_releases_are_one_list(pin):
    assert pin.SUPPORTED == SUPPORTED and pin.DEFAULT == DEFAULT and DEFAULT in SUPPORTED


@pytest.mark.parametrize("release", SUPPORTED)
def test_an_isolated_build_uses_the_torch_already_in_the_target_environment(
    pin, tmp_path, monkeypatch, release
):
    site = site_with_torch(tmp_path, f"{release}+cu130")
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {"purelib": str(site)})
    assert pin.get_requires_for_dynamic_metadata({}) == [f"torch=={release}"]


@pytest.mark.parametrize("installed", [None, "2.12.0", "2.16.0"])
def test_an_isolated_build_uses_the_default_without_a_supported_torch(
    pin, tmp_path, monkeypatch, installed
):
    site = site_with_torch(tmp_path, installed) if installed else tmp_path
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {"purelib": str(site)})
    assert pin.get_requires_for_dynamic_metadata({}) == [f"torch=={DEFAULT}"]


def test_the_wheel_is_pinned_to_the_build_environments_torch(pin, monkeypatch):
    monkeypatch.setattr(pin, "_torch_version", lambda path=None: "2.15.0+cu132")
    assert pin.dynamic_metadata("dependencies", {"also": ["numpy"]}) == ["torch==2.15.0", "numpy"]


def test_a_build_environment_without_a_supported_torch_is_refused(pin, monkeypatch):
    monkeypatch.setattr(pin, "_torch_version", lambda path=None: "2.12.1")
    with pytest.raises(RuntimeError, match=r"builds against torch 2\.13\.0, .*has torch 2\.12\.1"):
        pin.dynamic_metadata("dependencies", {})
    monkeypatch.setattr(pin, "_torch_version", lambda path=None: None)
    with pytest.raises(RuntimeError, match="the build environment has none"):
        pin.dynamic_metadata("dependencies", {})
