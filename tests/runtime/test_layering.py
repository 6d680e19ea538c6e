"""The source tree keeps its layers: dependencies point one way (README, Architecture).

runtime (no torch, no Python) <- backend <- bindings <- Python; inside cpp/backend, each concern
folder includes only the folders below it; no include cycle among backend files; and nothing in
production code reaches the test-only libraries (cpp/*/testing, torch_vdev._testing)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.MULTILINE)

# What each backend folder may include besides itself (new subsystems add their row).
BACKEND_DEPENDS_ON = {
    "common": set(),
    "memory": {"common"},
    "random": {"common"},
    "amp": set(),
    "device": {"common", "memory", "random"},
    "executor": {"common", "memory", "random"},
    "ops": {"common", "memory", "executor", "random"},
    "distributed": {"common", "memory"},
    "compile": {"common"},
    "graphs": {"common", "memory", "random"},
    "testing": {
        "common",
        "memory",
        "random",
        "amp",
        "device",
        "executor",
        "ops",
        "distributed",
        "compile",
        "graphs",
    },
}


def sources(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in {".h", ".cpp"})


def includes(path: Path) -> list[str]:
    return INCLUDE.findall(path.read_text())


def is_test_code(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    return "testing" in parts or "tests" in parts


def test_runtime_includes_neither_torch_nor_python_nor_the_backend():
    bad = [
        (str(p.relative_to(ROOT)), inc)
        for p in sources("cpp/runtime")
        for inc in includes(p)
        if inc.split("/")[0] in {"backend", "c10", "ATen", "torch", "nanobind"} or inc == "Python.h"
    ]
    assert not bad, bad


def test_backend_folders_include_only_the_folders_below_them():
    folders = {p.name for p in (ROOT / "cpp/backend").iterdir() if p.is_dir()}
    assert folders <= set(BACKEND_DEPENDS_ON), f"add new folders to the table: {folders}"
    bad = []
    for p in sources("cpp/backend"):
        own = p.relative_to(ROOT / "cpp/backend").parts[0]
        allowed = BACKEND_DEPENDS_ON[own] | {own}
        for inc in includes(p):
            parts = inc.split("/")
            if parts[0] == "backend" and parts[1] not in allowed and not is_test_code(p):
                bad.append((str(p.relative_to(ROOT)), inc))
    assert not bad, bad


def test_no_include_cycle_among_backend_files():
    graph = {}
    for p in sources("cpp/backend"):
        name = str(p.relative_to(ROOT / "cpp"))
        graph[name] = [i for i in includes(p) if i.startswith("backend/")]
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, []):
            assert state.get(nxt) != 1, "include cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


def test_production_code_does_not_reach_test_only_code():
    bad = [
        (str(p.relative_to(ROOT)), inc)
        for folder in ("cpp/runtime", "cpp/backend", "bindings")
        for p in sources(folder)
        if not is_test_code(p) and p.name != "testing_module.cpp"
        for inc in includes(p)
        if "/testing/" in inc or inc.startswith("testing/")
    ]
    assert not bad, bad
    python = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "python").rglob("*.py")
        if "_testing" in p.read_text()
    ]
    assert not python, python
