"""``python -m torch_vdev.sanitize [--tool streams,init,poison] [--error] script.py [args...]``

Runs a script under vdev's sanitizer (torch.vdev.sanitizer), the way compute-sanitizer runs a CUDA
program: findings are reported as they happen and the script goes on (``--error`` stops at the
first, raising it in the script), then a summary lists what was found. The exit status is the
script's, or 1 when the script succeeded but something was found. Processes the script starts
(``torch.multiprocessing.spawn``, DDP's ranks, subprocesses) inherit the tools through
``VDEV_SANITIZER`` and write their findings as they report them into a directory the CLI names in
``VDEV_SANITIZER_FINDINGS_DIR`` (backend/sanitizer/findings_file.h): the summary and the exit status
count them too. Stacks begin at the script: the CLI's own frames and runpy's are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m torch_vdev.sanitize",
        description="Run a Python script under vdev's sanitizer and summarise its findings.",
    )
    parser.add_argument(
        "--tool",
        default="streams",
        help="comma-separated tools: streams (races between streams), init (uninitialized "
        "reads), poison (fill fresh and freed memory with NaN bits); default: streams",
    )
    parser.add_argument(
        "--error", action="store_true", help="raise the first finding in the script and stop"
    )
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return parser.parse_args(argv)


_FINDINGS_DIR = "VDEV_SANITIZER_FINDINGS_DIR"
_KINDS = {0: "data race", 1: "uninitialized read"}


@dataclass(frozen=True)
class _Reported:
    """One finding of the summary: ``pid`` is the child process's (None: this process)."""

    kind: str
    message: str | None  # None: counted beyond what a process keeps
    pid: int | None = None


def _child_findings(directory: str) -> list[_Reported]:
    """What the processes the script started reported (findings_file.h's files), by process."""
    found: list[_Reported] = []
    own = f"findings-{os.getpid()}.jsonl"  # this process's: torch.vdev.sanitizer has them
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("findings-") and name.endswith(".jsonl")) or name == own:
            continue
        pid = int(name[len("findings-") : -len(".jsonl")])
        # A message is the report's bytes: never let one that is not UTF-8 lose the summary.
        with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:  # a process killed while writing its last line
                    continue
                found.append(_Reported(_KINDS[record["kind"]], record.get("message"), pid))
    return found


def _summary(findings: list[_Reported], total: int) -> str:
    if total == 0:
        return "========= vdev sanitizer: no findings"
    kinds: dict[str, int] = {}
    for f in findings:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    counts = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in sorted(kinds.items()))
    lines = [f"========= vdev sanitizer: {total} finding{'s' if total > 1 else ''} ({counts})"]
    shown = [f for f in findings if f.message is not None]
    for i, f in enumerate(shown, 1):
        where = "" if f.pid is None else f"(in child process {f.pid}) "
        lines.append(f"========= [{i}] {where}{f.message}")
    if total > len(shown):
        lines.append(f"========= ... and {total - len(shown)} more (the first {len(shown)} kept)")
    return "\n".join(lines)


def _hide_runner_frames() -> None:
    """Stacks begin at the user's script: this module's frames and runpy's (``python -m`` and
    run_path) are left out while they are the outermost ones."""
    from torch_vdev import _C

    files = {__file__, os.path.realpath(__file__), runpy.__file__, "<frozen runpy>"}
    _C._sanitizer_hide_outer_frames(sorted(f for f in files if f))


def main(argv: list[str] | None = None) -> int:
    options = _parse(sys.argv[1:] if argv is None else argv)
    import torch

    sanitizer = torch.vdev.sanitizer
    tools = options.tool + ("" if options.error else ",warn")
    try:
        flags = sanitizer._flags(tools)
    except ValueError as e:
        print(f"python -m torch_vdev.sanitize: {e}", file=sys.stderr)
        return 2
    os.environ["VDEV_SANITIZER"] = tools
    findings_dir = tempfile.mkdtemp(prefix="vdev-sanitize-")
    os.environ[_FINDINGS_DIR] = findings_dir  # inherited by the processes the script starts
    _hide_runner_frames()
    sanitizer.clear_findings()
    sanitizer._C._sanitizer_set_flags(flags)
    # Findings are printed once, in the summary (the warnings that report them are silenced).
    warnings.filterwarnings("ignore", message=r"(data race|uninitialized read):")
    sys.argv = [options.script, *options.args]
    status = 0
    try:
        runpy.run_path(options.script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # the script's own failure: shown as Python shows it
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        try:
            torch.vdev.synchronize()
        except Exception:  # noqa: BLE001 - a queued error the script never saw: reported above
            pass
    mine = [_Reported(f.kind, f.message) for f in sanitizer.findings()]
    children = _child_findings(findings_dir)
    shutil.rmtree(findings_dir, ignore_errors=True)
    total = sanitizer.finding_count() + len(children)
    print(_summary(mine + children, total), file=sys.stderr)
    if status == 0 and total > 0:
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
