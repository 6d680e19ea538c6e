"""torch-vdev's version, the one place it is written: the wheel's metadata reads it
(pyproject.toml), and it is a module of its own so that the import-time release check can name it
while the package is still initialising."""

VERSION = "0.1.0"
