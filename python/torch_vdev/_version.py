"""torch-vdev's version (pyproject.toml's [project] version): a module of its own so that the
import-time release check can name it while the package is still initialising."""

VERSION = "0.1.0"
