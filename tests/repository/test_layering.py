"""The source tree keeps its layers: dependencies point one way. This file is the one statement of
the layer rules (cpp/backend/README.md, CMakeLists.txt and docs/architecture.md point here).

runtime (no torch, no Python) <- backend <- bindings <- Python; inside cpp/backend, each concern
folder includes only the folders in its row of BACKEND_DEPENDS_ON; no cycle among the modules of
cpp/backend or cpp/runtime (a module is a .h with its .cpp: an edge from either file counts), nor
among the modules of python/torch_vdev; ops/ holds only kernels; and nothing in production code
reaches the test-only libraries (cpp/*/testing, torch_vdev._testing)."""

import ast
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
    # The bug finders (torch.vdev.sanitizer): observers of launches (common/launch.h) and of the
    # allocators; no folder that queues work includes them (test below).
    "sanitizer": {"common", "memory"},
    "device": {"common", "memory", "random", "sanitizer"},
    # The checks made at a call, before anything is queued (checks/call_checks.h).
    "checks": {"common", "memory"},
    "executor": {"common", "memory", "random", "checks"},
    # Sparse and quantized tensors: CPU views of their members, host runs, queued products.
    "layouts": {"common", "memory"},
    "ops": {"common", "memory", "executor", "random", "checks", "layouts"},
    "distributed": {"common", "memory"},
    "compile": {"common"},
    "graphs": {"common", "memory", "random"},
    # torch.profiler's device activities: the runtime's task records as Kineto activities, and the
    # legacy profiler's stubs (events on the current stream: common's stream lookup and checks).
    "profiler": {"common"},
    "testing": {
        "common",
        "memory",
        "random",
        "amp",
        "device",
        "checks",
        "executor",
        "layouts",
        "ops",
        "distributed",
        "compile",
        "graphs",
        "profiler",
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


def module_graph(folder: str) -> dict[str, set[str]]:
    """Modules of `folder` (a .h with its .cpp is one node, named by its path without suffix) and
    the modules of the same folder tree each includes, test-only code left out."""
    base = ROOT / "cpp"
    graph: dict[str, set[str]] = {}
    for p in sources(folder):
        if is_test_code(p):
            continue
        node = str(p.relative_to(base).with_suffix(""))
        edges = graph.setdefault(node, set())
        for inc in includes(p):
            target = str(Path(inc).with_suffix(""))
            if inc.startswith(folder.removeprefix("cpp/") + "/") and target != node:
                edges.add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_backend_modules_have_no_cycle():
    cycle = find_cycle(module_graph("cpp/backend"))
    assert cycle is None, "module cycle: " + " -> ".join(cycle)


def test_runtime_modules_have_no_cycle():
    graph = module_graph("cpp/runtime")
    assert "runtime/stream" in graph and "runtime/stream_registry" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "module cycle: " + " -> ".join(cycle)


# The stages of a call that ops/fallback.cpp, the boxed kernel and the express lane's kernels,
# hands a call to. No other executor header is included from ops/: helpers that kernels share
# live in common/.
EXECUTOR_STAGES = {
    "backend/executor/enqueue.h",
    "backend/executor/host_run.h",
    "backend/executor/express.h",
}


def test_ops_holds_only_kernels():
    ops = ROOT / "cpp/backend/ops"
    headers = sorted(p.name for p in ops.glob("*.h"))
    assert not headers, f"ops/ holds kernels only; move {headers} to the folder of their concern"
    registers = ("TORCH_LIBRARY_IMPL", "REGISTER_PRIVATEUSE1_DISPATCH")
    not_kernels = [
        p.name for p in sources("cpp/backend/ops") if not any(r in p.read_text() for r in registers)
    ]
    assert not not_kernels, f"these ops/ files register no kernel: {not_kernels}"
    helpers = [
        (p.name, inc)
        for p in sources("cpp/backend/ops")
        for inc in includes(p)
        if inc.startswith("backend/executor/")
        and (inc not in EXECUTOR_STAGES or p.name != "fallback.cpp")
    ]
    assert not helpers, helpers


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


# Python: torch_vdev's modules import one another without a circle. (This import stays with the
# tests that use it, after the C++ ones.)
PYTHON = ROOT / "python"


def python_modules() -> dict[str, Path]:
    """torch_vdev's Python modules by dotted name (a package is its __init__.py)."""
    modules = {}
    for p in sorted((PYTHON / "torch_vdev").rglob("*.py")):
        parts = p.relative_to(PYTHON).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return modules


def import_nodes(tree: ast.Module, deferred: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of a module: those run when it is imported (outside any function,
    including under if/try/with and in class bodies), and with ``deferred`` also those inside
    functions, which run only when the function is called."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not deferred:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def imported_modules(name: str, path: Path, modules: dict[str, Path], deferred: bool) -> set[str]:
    """The torch_vdev modules ``name`` imports. ``torch.vdev`` is torch_vdev.vdev; ``from P import
    x`` imports P.x when that is one of the modules, else P (``from torch_vdev import _C`` imports
    the torch_vdev package: _C is the extension)."""

    def own(dotted: str) -> str | None:
        if dotted == "torch.vdev" or dotted.startswith("torch.vdev."):
            dotted = "torch_vdev.vdev" + dotted[len("torch.vdev") :]
        if dotted != "torch_vdev" and not dotted.startswith("torch_vdev."):
            return None
        while dotted not in modules:  # an attribute of a module: the module
            dotted = dotted.rsplit(".", 1)[0]
        return dotted

    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in import_nodes(ast.parse(path.read_text()), deferred):
        if isinstance(node, ast.Import):
            found |= {m for a in node.names if (m := own(a.name))}
            continue
        base = node.module or ""
        if node.level:
            anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{anchor}.{base}" if base else anchor
        for alias in node.names:
            if m := own(f"{base}.{alias.name}"):
                found.add(m)
    found.discard(name)
    return found


def python_import_graph(deferred: bool) -> dict[str, set[str]]:
    modules = python_modules()
    return {n: imported_modules(n, p, modules, deferred) for n, p in modules.items()}


def test_python_package_has_no_import_cycle():
    """No circle among torch_vdev's modules at module level: the imports a module runs when it is
    imported (``torch.vdev`` counts as torch_vdev.vdev). Imports inside functions are deferred (run
    when the function is called) and are left out here; the next test adds them."""
    graph = python_import_graph(deferred=False)
    # The graph sees the package's edges (else a cycle could not be found either).
    assert "torch_vdev.vdev.streams" in graph["torch_vdev.vdev"]
    assert "torch_vdev.vdev" in graph["torch_vdev.compile.device_interface"]
    assert "torch_vdev.compile.torch_internals" in graph["torch_vdev.compile"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_python_package_has_no_import_cycle_through_deferred_imports():
    """As above with the imports inside functions too, except a module's imports of its own
    packages (``torch_vdev.vdev.random`` calling ``torch_vdev.vdev._lazy_init``): a package has
    finished importing before any function of its modules runs. So torch.vdev does not import
    torch.compile's support (which imports torch.vdev) even lazily."""
    graph = python_import_graph(deferred=True)
    assert "torch_vdev.compile.inductor_backend" in graph["torch_vdev.compile"]
    for name, targets in graph.items():
        targets -= {t for t in targets if name.startswith(t + ".")}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# The sanitizer observes launches (common/launch.h); only the device's start-up (which reads
# VDEV_SANITIZER and turns its switch) and the sanitizer's own bindings know it.
SANITIZER_USERS = {
    "cpp/backend/device/init.cpp",
    "bindings/sanitizer.cpp",
    "bindings/sanitizer_errors.cpp",
}


def test_no_queuing_code_depends_on_the_sanitizer():
    bad = []
    for folder in ("cpp/backend", "bindings"):
        for p in sources(folder):
            name = str(p.relative_to(ROOT))
            if is_test_code(p) or name.startswith("cpp/backend/sanitizer/"):
                continue
            if name not in SANITIZER_USERS and any(
                inc.startswith("backend/sanitizer/") for inc in includes(p)
            ):
                bad.append(name)
    assert not bad, bad


# Work reaches a stream only from a launch description (common/task.h's queue_launch and
# queue_copy), so every tool sees it; the poison fill is the sanitizer's own work on fresh and
# freed blocks, which no observer may see as a write; the testing module's runtime probes test the
# runtime's streams themselves (torch_vdev._testing).
DIRECT_QUEUERS = {
    "cpp/backend/common/task.h",
    "cpp/backend/common/task.cpp",
    "cpp/backend/sanitizer/poison.cpp",
    "bindings/testing_module.cpp",
}
RUNTIME_QUEUE = re.compile(r"(\.|->)enqueue\(|memcpy_async\(")


def test_work_is_queued_only_from_a_launch_description():
    bad = [
        str(p.relative_to(ROOT))
        for folder in ("cpp/backend", "bindings")
        for p in sources(folder)
        if not is_test_code(p)
        and str(p.relative_to(ROOT)) not in DIRECT_QUEUERS
        and RUNTIME_QUEUE.search(re.sub(r"//.*", "", p.read_text()))
    ]
    assert not bad, bad


def test_each_backend_folder_lists_its_sources_beside_its_readme():
    """cpp/backend/<folder>/sources.cmake lists exactly the folder's .cpp files (tests/ and the
    test-only testing/ folder have their own targets), next to the README that says what each
    holds; CMakeLists.txt includes every folder's list."""
    top = (ROOT / "CMakeLists.txt").read_text()
    for folder in sorted(p for p in (ROOT / "cpp/backend").iterdir() if p.is_dir()):
        if folder.name == "testing":
            continue
        listed = set(
            re.findall(
                r"\$\{CMAKE_CURRENT_LIST_DIR\}/(\w+\.cpp)", (folder / "sources.cmake").read_text()
            )
        )
        present = {p.name for p in folder.glob("*.cpp")}
        assert listed == present, (folder.name, listed ^ present)
        assert (folder / "README.md").exists(), folder.name
        assert re.search(rf"^\s+{folder.name}\)?$", top, re.MULTILINE), (
            f"{folder.name} not included"
        )
