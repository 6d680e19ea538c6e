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


def test_supported_releases_are_oldest_first_and_hold_the_default():
    # The provider's error names SUPPORTED[-1] as the release to install: the newest.
    releases = [tuple(int(p) for p in r.split(".")) for r in SUPPORTED]
    assert releases == sorted(set(releases)) and DEFAULT in SUPPORTED


def target(monkeypatch, site, platlib=None):
    """The environment the wheel goes into: its site-packages are `site` (and `platlib`)."""
    paths = {"purelib": str(site), "platlib": str(platlib or site)}
    monkeypatch.delenv("VDEV_TORCH_RELEASE", raising=False)
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: paths)


@pytest.mark.parametrize("release", SUPPORTED)
def test_an_isolated_build_uses_the_torch_already_in_the_target_environment(
    pin, tmp_path, monkeypatch, release
):
    target(monkeypatch, site_with_torch(tmp_path, f"{release}+cu130"))
    assert pin.get_requires_for_dynamic_metadata({}) == [f"torch=={release}"]


def test_torch_in_platlib_only_is_found(pin, tmp_path, monkeypatch):
    target(monkeypatch, tmp_path / "x", platlib=site_with_torch(tmp_path, "2.14.1"))
    assert pin.get_requires_for_dynamic_metadata({}) == ["torch==2.14.1"]


def test_a_fresh_environment_gets_the_default(pin, tmp_path, monkeypatch):
    target(monkeypatch, tmp_path)
    assert pin.get_requires_for_dynamic_metadata({}) == [f"torch=={DEFAULT}"]


@pytest.mark.parametrize("installed", ["2.12.0", "2.16.0"])
def test_an_unsupported_torch_in_the_target_is_refused_not_replaced(
    pin, tmp_path, monkeypatch, installed
):
    target(monkeypatch, site_with_torch(tmp_path, installed))
    with pytest.raises(RuntimeError, match=f"has torch {installed}"):
        pin.get_requires_for_dynamic_metadata({})


def test_vdev_torch_release_chooses_for_other_front_ends(pin, tmp_path, monkeypatch):
    target(monkeypatch, site_with_torch(tmp_path, "2.13.0"))
    monkeypatch.setenv("VDEV_TORCH_RELEASE", "2.15.0")
    assert pin.get_requires_for_dynamic_metadata({}) == ["torch==2.15.0"]
    monkeypatch.setenv("VDEV_TORCH_RELEASE", "2.15")
    with pytest.raises(RuntimeError, match="VDEV_TORCH_RELEASE has torch 2.15"):
        pin.get_requires_for_dynamic_metadata({})


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
