"""Imports run one way: CLI → library → engine. Checked by parsing every module's imports with `ast`.

Rules:
- the folders of `fair_retrieval/` are layers (`LAYERS`, lowest first): a module imports only its own folder and
  lower layers, so nothing imports upward (the package root, which re-exports the public names, is above the
  library, and only the CLI sits above it); the leaf helpers (`validate`, `version`, `jsonio/`, then
  `text_checks`, then `frozen_json`, `inputs`) are the lowest, and the engine (`engine/`) imports only itself and
  them;
- no circle: no module imports itself through others (function-level imports included), in the library or among
  the benchmarks;
- no two modules of the library, the integration packages or the benchmarks have the same file name (`__init__.py`
  and `conftest.py` aside), so a name says one job;
- no `fair_retrieval/cli/cmd_*.py` imports another command module (shared code lives in cli/common.py,
  cli/options.py and the other non-command modules of cli/);
- the integration packages under `integrations/` (the LangChain and LlamaIndex adapters) import fair_retrieval only
  through its public surface: `fair_retrieval`, `fair_retrieval.adapters`, `fair_retrieval.stores` and
  `fair_retrieval.index` (whose `__all__` list what they export), never a module inside them, so the library's
  modules can be rearranged without breaking an adapter. Their tests may reach further.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fair_retrieval"
INTEGRATIONS = PACKAGE.parent / "integrations"
ADAPTER_MAY_IMPORT = {"fair_retrieval", "fair_retrieval.adapters", "fair_retrieval.stores", "fair_retrieval.index"}
NOT_ADAPTER_CODE = {"tests", "build", "dist"}  # folders of an integration project that are not its package
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"fair_retrieval.validate", "fair_retrieval.version", "fair_retrieval.jsonio"}),
    frozenset({"fair_retrieval.text_checks"}),
    frozenset({"fair_retrieval.frozen_json", "fair_retrieval.inputs"}),
    frozenset({"fair_retrieval.engine"}),
    frozenset({"fair_retrieval.embedding"}),
    frozenset({"fair_retrieval.index", "fair_retrieval.lexical"}),
    frozenset({"fair_retrieval.stores", "fair_retrieval.evaluation", "fair_retrieval.adapters"}),
    frozenset({"fair_retrieval.tuning", "fair_retrieval.distributed"}),
    frozenset({"fair_retrieval"}),  # the package root: the public names, re-exported
    frozenset({"fair_retrieval.cli"}),  # with fair_retrieval.__main__
)
"""The layers of the package, lowest first: each entry a set of folders (or top-level modules)."""
ENTRY_POINT = "fair_retrieval.__main__"
BENCHMARKS = PACKAGE.parent / "benchmarks"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, package: str) -> set[str]:
    """Every fair_retrieval module that `path` (a module of `package`) imports, function-level imports included."""
    return source_imports(path.read_text(encoding="utf-8"), package)


def source_imports(source: str, package: str) -> set[str]:
    """Every fair_retrieval module that `source` (the text of a module of `package`) imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}"))
    return {name for name in found if name == "fair_retrieval" or name.startswith("fair_retrieval.")}


def _is_module(name: str) -> bool:
    """True if `name` is a module or package of fair_retrieval (so `from pkg import module` counts as an import)."""
    relative = Path(*name.split(".")[1:]) if "." in name else Path()
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative / "__init__.py").is_file()


def modules() -> dict[str, set[str]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        found[name] = imported_modules(path, name if path.name == "__init__.py" else name.rsplit(".", 1)[0])
    return found


def unit_of(name: str) -> str:
    """The folder (or top-level module) of `name` that `LAYERS` lists (fair_retrieval.index.index_plan: its folder)."""
    if name == ENTRY_POINT:
        return "fair_retrieval.cli"  # `python -m fair_retrieval` is the command line
    parts = name.split(".")
    return "fair_retrieval" if len(parts) == 1 else ".".join(parts[:2])


def layer_of(name: str) -> int:
    unit = unit_of(name)
    for position, units in enumerate(LAYERS):
        if unit in units:
            return position
    raise AssertionError(f"{unit} is in no layer of LAYERS: add it where it belongs")


def violations() -> list[str]:
    found = []
    for name, imports in modules().items():
        if name.startswith("fair_retrieval.cli.cmd_"):
            others = sorted(i for i in imports if i.startswith("fair_retrieval.cli.cmd_") and i != name)
            found += [f"{name} imports the command module {other}" for other in others]
        for imported in sorted(imports):
            if unit_of(imported) != unit_of(name) and layer_of(imported) >= layer_of(name):
                found.append(f"{name} (layer {layer_of(name)}) imports {imported} (layer {layer_of(imported)})")
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module of an import graph (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def module_graph() -> dict[str, set[str]]:
    """Every library module → the library modules it imports, a package's import of a submodule counted as an
    import of the submodule only (`from fair_retrieval.engine import kernels` → fair_retrieval.engine.kernels)."""
    found = modules()
    graph = {}
    for name, imports in found.items():
        graph[name] = {
            i
            for i in imports
            if i != name and not any(other.startswith(i + ".") for other in imports if other in found)
        }
    return graph


def benchmark_graph() -> dict[str, set[str]]:
    """Every benchmark script → the benchmark scripts it imports (they import each other by module name)."""
    scripts = {path.stem: path for path in BENCHMARKS.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in scripts.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in scripts and not node.level:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names if alias.name in scripts)
        graph[name] = imported - {name}
    return graph


def adapter_modules() -> list[Path]:
    """Every module of the integration projects (each folder of `integrations/` with a pyproject.toml), their
    tests, build folders and egg-info aside."""
    found = []
    for project in sorted(path.parent for path in INTEGRATIONS.glob("*/pyproject.toml")):
        for path in sorted(project.rglob("*.py")):
            parts = path.relative_to(project).parts
            if not any(part in NOT_ADAPTER_CODE or part.endswith(".egg-info") for part in parts):
                found.append(path)
    return found


def adapter_violations(source: str, where: str) -> list[str]:
    """The fair_retrieval modules outside the public surface (`ADAPTER_MAY_IMPORT`) that adapter code imports."""
    return [
        f"{where} (an adapter) imports {name}; import it from {', '.join(sorted(ADAPTER_MAY_IMPORT))} instead"
        for name in sorted(source_imports(source, "") - ADAPTER_MAY_IMPORT)
    ]


def test_imports_run_one_way() -> None:
    assert violations() == []


def test_every_folder_of_the_package_is_in_a_layer() -> None:
    for name in modules():
        layer_of(name)  # raises for a folder LAYERS does not list


def test_the_layer_rule_flags_an_upward_import() -> None:
    assert layer_of("fair_retrieval.engine.attention") < layer_of("fair_retrieval.embedding.embedder")
    assert layer_of("fair_retrieval.index.index_plan") < layer_of("fair_retrieval")  # the root is above the library
    assert unit_of("fair_retrieval.validate") == "fair_retrieval.validate" and layer_of("fair_retrieval.validate") == 0


def test_no_import_circle_in_the_library_or_the_benchmarks() -> None:
    assert circles(module_graph()) == []
    assert circles(benchmark_graph()) == []


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_ray_command_code_lives_in_the_cli() -> None:
    assert "fair_retrieval.cli.ray_engine" in modules()
    assert not any(name.startswith("fair_retrieval.distributed.") and "command" in name for name in modules())


def test_the_checker_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from fair_retrieval.cli.cmd_eval import run\n    from .. import index\n")
    found = imported_modules(source, "fair_retrieval.cli")
    assert {"fair_retrieval.cli.cmd_eval", "fair_retrieval.index"} <= found
    assert "fair_retrieval.cli.cmd_index" in modules()  # the scan covers the command modules


def test_adapters_import_only_the_public_surface() -> None:
    found = []
    for path in adapter_modules():
        found += adapter_violations(path.read_text(encoding="utf-8"), path.relative_to(INTEGRATIONS).as_posix())
    assert found == []


def test_the_adapter_scan_covers_every_integration_package() -> None:
    scanned = {path.relative_to(INTEGRATIONS).as_posix() for path in adapter_modules()}
    assert "langchain/langchain_fair/vectorstores.py" in scanned
    assert "llamaindex/llama_index/embeddings/fair/base.py" in scanned
    assert "llamaindex-vector-stores/llama_index/vector_stores/fair/faiss_vector_store.py" in scanned
    assert not any("/tests/" in name or name.endswith("conftest.py") for name in scanned)


def test_the_adapter_rule_flags_internal_imports() -> None:
    source = (
        "from fair_retrieval import FairEmbedder, stores\n"
        "from fair_retrieval.stores import IndexedRecords\n"
        "from fair_retrieval.index import GpuChoice\n"
        "import fair_retrieval\n"
        "from fair_retrieval.stores.records import IndexedRecords\n"
        "import fair_retrieval.index.gpu\n"
        "from fair_retrieval import jsonio\n"
        "def later():\n"
        "    from fair_retrieval.engine.hook import Pooling\n"
    )
    flagged = adapter_violations(source, "probe.py")
    assert [message.split(" imports ")[1].split(";")[0] for message in flagged] == [
        "fair_retrieval.engine.hook",
        "fair_retrieval.index.gpu",
        "fair_retrieval.jsonio",
        "fair_retrieval.stores.records",
    ]
    assert all(message.startswith("probe.py (an adapter) imports ") for message in flagged)
    assert (
        adapter_violations(
            "from fair_retrieval import FairEmbedder\nfrom fair_retrieval.stores import preview\n", "ok.py"
        )
        == []
    )


def test_every_name_of_the_public_surface_is_exported_and_documented() -> None:
    import importlib

    for name in sorted(ADAPTER_MAY_IMPORT):
        module = importlib.import_module(name)
        exported = module.__all__
        assert len(exported) == len(set(exported)), name
        missing = [item for item in exported if not hasattr(module, item)]
        undocumented = [item for item in exported if f"`{item}`" not in (module.__doc__ or "")]
        assert missing == [] and undocumented == [], (name, missing, undocumented)


NAMED_FOLDERS = (PACKAGE, INTEGRATIONS, BENCHMARKS)
SHARED_NAMES = {"__init__.py", "conftest.py"}  # names Python and pytest give a role, found in many folders


def duplicate_module_names(paths: list[Path]) -> dict[str, list[str]]:
    """Module file names used by more than one module among `paths` (`SHARED_NAMES` aside), with their paths."""
    by_name: dict[str, list[str]] = {}
    for path in paths:
        if path.name not in SHARED_NAMES:
            by_name.setdefault(path.name, []).append(path.as_posix())
    return {name: sorted(found) for name, found in by_name.items() if len(found) > 1}


def test_every_module_name_is_unique_in_the_library_the_integrations_and_the_benchmarks() -> None:
    paths = [
        path.relative_to(PACKAGE.parent)
        for folder in NAMED_FOLDERS
        for path in folder.rglob("*.py")
        if not any(part in {"build", "dist"} or part.endswith(".egg-info") for part in path.parts)
    ]
    assert len(paths) > 100  # the scan sees the three folders
    assert duplicate_module_names(paths) == {}


def test_the_duplicate_finder_finds_a_name_used_twice() -> None:
    paths = [Path("a/plan.py"), Path("b/plan.py"), Path("a/__init__.py"), Path("b/__init__.py"), Path("c/x.py")]
    assert duplicate_module_names(paths) == {"plan.py": ["a/plan.py", "b/plan.py"]}


ADAPTER_PACKAGES = {
    "langchain": INTEGRATIONS / "langchain" / "langchain_fair",
    "llamaindex-vector-stores": INTEGRATIONS / "llamaindex-vector-stores" / "llama_index" / "vector_stores" / "fair",
    "llamaindex": INTEGRATIONS / "llamaindex" / "llama_index" / "embeddings" / "fair",
}
CORE_NAMES_AT_MOST = {"langchain": 26, "llamaindex-vector-stores": 13, "llamaindex": 16}
"""How many names each adapter package imports from fair_retrieval at most (the store door's and the embeddings'
options): an adapter translates its framework's types; a new name is a new piece of core logic it assembles. The
store packages' Qdrant stores add one each (`QdrantStore`, the door over a collection), and LangChain's embeddings
the default model's rule (`adapter_model`, which LlamaIndex's took in place of another name)."""


def core_names(package: Path) -> set[str]:
    """The distinct `module.name` an adapter package imports from fair_retrieval (every module of the package)."""
    found: set[str] = set()
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "fair_retrieval":
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "fair_retrieval")
    return found


def test_each_adapter_package_imports_a_handful_of_core_names() -> None:
    counts = {name: len(core_names(package)) for name, package in ADAPTER_PACKAGES.items()}
    assert all(counts.values())  # the scan sees each package
    assert {name: count for name, count in counts.items() if count > CORE_NAMES_AT_MOST[name]} == {}, counts
    store_side = {name for name in core_names(ADAPTER_PACKAGES["llamaindex-vector-stores"]) if ".stores." in name}
    assert "fair_retrieval.stores.DocumentStore" in store_side
