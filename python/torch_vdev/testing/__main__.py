"""``python -m torch_vdev.testing``: what a test harness needs to run on vdev, for shell scripts
and CI files.

    python -m torch_vdev.testing hf-spec   # the path of Hugging Face's device spec file
    python -m torch_vdev.testing env       # `export VARIABLE=value` lines, for eval or $GITHUB_ENV

``env --format dotenv`` prints ``VARIABLE=value`` lines (GitHub Actions' ``$GITHUB_ENV``).
"""

from __future__ import annotations

import argparse
import shlex
import sys

from torch_vdev import testing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m torch_vdev.testing",
        description="What a library's test harness needs to run on vdev "
        "(docs/testing-your-library.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "hf-spec",
        help="print the path of the device spec file of Hugging Face's harnesses "
        "(TRANSFORMERS_TEST_DEVICE_SPEC, DIFFUSERS_TEST_DEVICE_SPEC)",
    )
    env = commands.add_parser(
        "env", help="print the variables that make the harnesses use vdev (what --vdev sets)"
    )
    env.add_argument(
        "--format",
        choices=("shell", "dotenv"),
        default="shell",
        help="shell: `export NAME=value` lines (eval them); dotenv: NAME=value lines "
        "(append them to $GITHUB_ENV)",
    )
    args = parser.parse_args(argv)
    if args.command == "hf-spec":
        print(testing.hf_spec_path())
        return 0
    for name, value in testing.environment().items():
        if args.format == "shell":
            print(f"export {name}={shlex.quote(value)}")
        else:
            print(f"{name}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
