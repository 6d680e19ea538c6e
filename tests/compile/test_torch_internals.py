"""The torch internals vdev's torch.compile support relies on (python/torch_vdev/compile/
torch_internals.py): every target of the manifest still exists, with the members vdev uses and the
signature recorded there, nothing in torch_vdev.compile reaches torch's internals around it, and
nothing elsewhere in the package reaches one that ELSEWHERE does not list.
After a torch upgrade this is the first test to run."""

import ast
import dataclasses
import inspect
import re
import textwrap
from pathlib import Path

import pytest
import torch

from torch_vdev._compat.releases import SUPPORTED, public_version
from torch_vdev.compile import torch_internals

ROOT = Path(__file__).resolve().parents[2]
COMPILE = ROOT / "python" / "torch_vdev" / "compile"
ENTRIES = torch_internals.MANIFEST_ENTRIES + torch_internals.ELSEWHERE
USES = {"call", "read", "subclass", "patch", "mutate", "post-import hook", "generated code"}
BOUNDARY_CALLS = {"get", "patch", "patch_item", "original", "hooked_module"}


def assigned_on_self(cls: type, name: str) -> bool:
    """Whether some class of ``cls``'s MRO assigns ``self.<name>`` (an instance attribute) or
    declares it as a dataclass field."""
    for klass in cls.__mro__:
        if dataclasses.is_dataclass(klass) and name in {f.name for f in dataclasses.fields(klass)}:
            return True
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr == name
            ):
                return True
    return False


def problems(entry: torch_internals.Internal) -> list[str]:
    """What no longer holds of ``entry`` in the installed torch (empty when it all does)."""
    try:
        obj = (
            torch_internals.original(entry.target)
            if entry.target in torch_internals.MANIFEST
            else torch_internals.resolve(entry.target)
        )
    except (ImportError, AttributeError) as e:
        return [f"{entry.target} does not exist: {e!r}"]
    found = []
    owner = obj if isinstance(obj, type) else type(obj)
    for name in entry.members:
        if not (hasattr(obj, name) or (isinstance(obj, type) and assigned_on_self(obj, name))):
            found.append(f"{entry.target} has no member {name!r} (of {owner.__name__})")
    actual = torch_internals.signature(obj) if callable(obj) else None
    recorded = entry.signature_in(torch.__version__)
    if recorded is not None and actual != recorded:
        found.append(f"{entry.target}{actual} is not {entry.target}{recorded}")
    if recorded is None and (inspect.isfunction(obj) or inspect.ismethod(obj)):
        found.append(f"{entry.target} is a Python function: record its signature {actual}")
    return found


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.target)
def test_every_target_exists_with_its_members_and_signature(entry):
    assert not problems(entry)


def test_a_changed_target_is_found():
    """The check above fails for a target that moved, lost a member or changed its signature."""
    entry = torch_internals.MANIFEST["torch._inductor.ir.is_cpu"]
    assert not problems(entry)
    moved = dataclasses.replace(entry, target="torch._inductor.ir.is_cpu_device")
    assert "does not exist" in problems(moved)[0]
    missing_module = dataclasses.replace(entry, target="torch._inductor.no_such_module.is_cpu")
    assert "does not exist" in problems(missing_module)[0]
    resigned = dataclasses.replace(entry, signature="(x, device)")
    assert "is not" in problems(resigned)[0]
    unsigned = dataclasses.replace(entry, signature=None)
    assert "record its signature" in problems(unsigned)[0]
    scheduler = torch_internals.MANIFEST["torch._inductor.scheduler.Scheduler"]
    assert not problems(scheduler)  # instance attributes (nodes, current_node, node_to_stream)
    lost = dataclasses.replace(scheduler, members=("nodes", "nodes_in_order"))
    assert problems(lost) == [
        "torch._inductor.scheduler.Scheduler has no member 'nodes_in_order' (of Scheduler)"
    ]


def test_entries_were_verified_against_the_installed_torch():
    # A new torch release fails here until every entry has been checked against its sources.
    assert set(SUPPORTED) <= set(torch_internals.TORCH_VERIFIED), "entries not verified yet"
    installed = public_version(torch.__version__)
    assert [e.target for e in ENTRIES if installed not in e.verified] == []
    for entry in ENTRIES:
        assert set(entry.verified) <= set(SUPPORTED), entry.target
        if isinstance(entry.signature, dict):  # a table lists every release it was verified in
            assert set(entry.signature) == set(entry.verified), entry.target


def test_a_signature_table_is_read_for_the_installed_release():
    entry = torch_internals.MANIFEST_ENTRIES[0]
    table = dataclasses.replace(entry, signature={"2.13.0": "(a)", "2.14.1": "(a, b=1)"})
    assert table.signature_in("2.14.1+cu130") == "(a, b=1)"
    assert table.signature_in("2.13.0+cpu") == "(a)"
    with pytest.raises(KeyError):
        table.signature_in("2.15.0")


def test_entries_say_what_why_and_where():
    assert len(torch_internals.MANIFEST) == len(torch_internals.MANIFEST_ENTRIES)  # no duplicate
    for entry in ENTRIES:
        assert entry.use in USES, entry
        assert entry.what and entry.why and entry.where, entry
        names = (entry.target.rsplit(".", 1)[-1], *entry.members)
        for path in entry.where:
            text = (ROOT / path).read_text()
            assert any(name in text for name in names), f"{path} does not use {entry.target}"


def test_unknown_targets_are_refused():
    with pytest.raises(KeyError, match="not in torch_internals.MANIFEST"):
        torch_internals.get("torch._inductor.utils.is_gpu")
    with pytest.raises(KeyError, match="listed for 'call'"):
        torch_internals.patch("torch._inductor.ir.get_device_type", lambda x: "vdev")


def test_every_patch_is_installed_once_torch_compile_has_run():
    torch.compile(lambda x: torch.nn.functional.conv2d(x, x[:1]) + 1)(
        torch.ones(1, 1, 3, 3, device="vdev")
    )
    torch.compile(lambda x: x * 2, mode="reduce-overhead")(torch.ones(2, device="vdev"))
    for entry in torch_internals.MANIFEST_ENTRIES:
        if entry.use != "patch":
            continue
        items = [k for k in torch_internals._originals if k.startswith(entry.target + "[")]
        if items:  # a table whose entries vdev replaced
            table = torch_internals.resolve(entry.target)
            assert all(
                table[key] is not torch_internals._originals[f"{entry.target}[{key}]"]
                for key in table
                if f"{entry.target}[{key}]" in torch_internals._originals
            )
            continue
        assert entry.target in torch_internals._originals, entry.target
        current = torch_internals.resolve(entry.target)
        assert current is not torch_internals.original(entry.target), entry.target


def python_modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def private(parts) -> set[str]:
    """The private parts of a dotted name (``_name``, not dunders)."""
    return {p for p in parts if p.startswith("_") and not p.startswith("__")}


def attribute_chains(tree: ast.AST):
    """Each whole attribute chain rooted at a name: (the name, the attributes in order)."""
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        chain, value = [node.attr], node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name):
            yield value.id, list(reversed(chain))


def private_torch_reaches(path: Path) -> list[str]:
    """Imports of torch submodules and ``torch.<...>._name`` attribute chains in ``path``."""
    found = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("torch.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch."):
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.ImportFrom) and node.module == "torch":
            found += [f"from torch import {a.name}" for a in node.names if a.name.startswith("_")]
    for name, chain in attribute_chains(tree):
        dotted = ".".join(["torch", *chain])
        vdev_own = dotted.startswith("torch.ops.vdev.")  # vdev's operators
        if name == "torch" and private(chain) and not vdev_own:
            found.append(dotted)
    return found


def test_compile_modules_reach_torch_internals_only_through_the_boundary():
    bad = {
        path.name: reaches
        for path in python_modules(COMPILE)
        if path.name != "torch_internals.py" and (reaches := private_torch_reaches(path))
    }
    assert not bad, bad


PACKAGE = ROOT / "python" / "torch_vdev"


def private_names(path: Path) -> list[tuple[str, set[str]]]:
    """The private torch names ``path`` reaches, each reach with the private parts it names
    (``_name``, not dunders): imports of private modules or names, ``torch.<...>._name`` chains,
    and attributes read off a name imported from torch (``reductions.shared_cache``)."""
    found = []
    tree = ast.parse(path.read_text())
    from_torch = {}  # local name -> torch module or object it was imported as
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for a in node.names:
                from_torch[a.asname or a.name] = f"{node.module}.{a.name}"
                names = private(node.module.split(".")) | private([a.name])
                if names:
                    found.append((f"from {node.module} import {a.name}", names))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("torch.") and private(a.name.split(".")):
                    found.append((f"import {a.name}", private(a.name.split("."))))
    for node in ast.walk(tree):  # a module named by its text (a post-import action's)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"torch(\.\w+)+", node.value) and private(node.value.split(".")):
                found.append((node.value, private(node.value.split("."))))
    for name, chain in attribute_chains(tree):
        root = "torch" if name == "torch" else from_torch.get(name)
        if root is None:
            continue  # not torch's
        dotted = ".".join([root, *chain])
        if dotted.startswith(("torch.vdev.", "torch.ops.vdev.")):
            continue  # vdev's own module and operators
        names = private(chain) | private(root.split("."))
        if names:
            found.append((dotted, names))
    return found


def test_the_whole_package_reaches_torch_internals_only_through_listed_entries():
    """Outside torch_vdev.compile (whose modules go through the boundary), each private reach is an
    entry of ELSEWHERE that names the file and the private name."""
    listed = {}
    for entry in torch_internals.ELSEWHERE:
        names = {entry.target.rsplit(".", 1)[-1], *entry.members} | set(entry.target.split("."))
        for path in entry.where:
            listed.setdefault(path, set()).update(names)
    unlisted = {}
    for path in python_modules(PACKAGE):
        rel = str(path.relative_to(ROOT))
        if path.is_relative_to(COMPILE):
            continue
        for reach, names in private_names(path):
            if not names <= listed.get(rel, set()):
                unlisted.setdefault(rel, []).append(reach)
    assert not unlisted, unlisted


def test_the_package_check_finds_an_unlisted_reach(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "import torch\nfrom torch.multiprocessing import reductions\n"
        "from torch._utils import helper\n"
        "MODULE = 'torch.testing._internal.common_utils'\n"
        "def f():\n"
        "    reductions.shared_cache.clear()\n"
        "    reductions._private.x = 1\n"
        "    return torch._C._get(), torch.vdev._initialized, torch.autograd.grad\n"
    )
    assert sorted(r for r, _ in private_names(module)) == [
        "from torch._utils import helper",
        "torch._C._get",
        "torch.multiprocessing.reductions._private.x",
        "torch.testing._internal.common_utils",
    ]


def test_the_boundary_check_finds_a_direct_reach(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "import torch\nimport torch._inductor.ir as ir\nfrom torch._inductor import config\n"
        "def f():\n"
        "    return torch._C._get_obj_in_tls('k'), torch.UntypedStorage._new_with_weak_ptr\n"
    )
    assert sorted(private_torch_reaches(module)) == [
        "from torch._inductor import ...",
        "torch.UntypedStorage._new_with_weak_ptr",
        "torch._C._get_obj_in_tls",
        "torch._inductor.ir",
    ]


def test_boundary_calls_name_manifest_targets():
    named = []
    for path in python_modules(ROOT / "python" / "torch_vdev"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "torch_internals"
                and node.func.attr in BOUNDARY_CALLS
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                named.append(node.args[0].value)
    assert named  # the modules do go through the boundary
    assert set(named) <= set(torch_internals.MANIFEST), set(named) - set(torch_internals.MANIFEST)
