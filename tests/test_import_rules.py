"""Imports run one way: CLI → library → engine. Checked by parsing every module's imports with `ast`.

Rules:
- no `fair_retrieval/cli/cmd_*.py` imports another command module (shared code lives in cli/common.py,
  cli/options.py and the other non-command modules of cli/);
- nothing under `fair_retrieval/` outside `cli/` imports `fair_retrieval.cli` (the library never reaches up);
- the engine (attention.py, kernels.py, calibration.py, positional.py) imports no other fair_retrieval module than the
  engine's own, `validate` and the `jsonio` package (its modules included); these leaves import nothing else of
  fair_retrieval;
- the integration packages under `integrations/` (the LangChain and LlamaIndex adapters) import fair_retrieval only
  through its public surface: `fair_retrieval`, `fair_retrieval.stores` and `fair_retrieval.index` (whose
  `__all__` list what they export), never a module inside them, so the library's modules can be rearranged without
  breaking an adapter. Their tests may reach further.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fair_retrieval"
INTEGRATIONS = PACKAGE.parent / "integrations"
ADAPTER_MAY_IMPORT = {"fair_retrieval", "fair_retrieval.stores", "fair_retrieval.index"}
NOT_ADAPTER_CODE = {"tests", "build", "dist"}  # folders of an integration project that are not its package
ENGINE = {
    "fair_retrieval.attention",
    "fair_retrieval.kernels",
    "fair_retrieval.calibration",
    "fair_retrieval.positional",
    "fair_retrieval.layers",
    "fair_retrieval.frozen_json",
}
JSONIO = "fair_retrieval.jsonio"  # the engine may import this package and its modules (`_in_jsonio`)
ENGINE_MAY_IMPORT = ENGINE | {"fair_retrieval.validate", "fair_retrieval"}
ENTRY_POINT = "fair_retrieval.__main__"  # `python -m fair_retrieval` runs the CLI (the top of the stack)


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


def violations() -> list[str]:
    found = []
    for name, imports in modules().items():
        if name.startswith("fair_retrieval.cli.cmd_"):
            others = sorted(i for i in imports if i.startswith("fair_retrieval.cli.cmd_") and i != name)
            found += [f"{name} imports the command module {other}" for other in others]
        elif not name.startswith("fair_retrieval.cli") and name != ENTRY_POINT:
            found += [f"{name} (library) imports {i}" for i in sorted(imports) if i.startswith("fair_retrieval.cli")]
        if name in ENGINE:
            found += [f"{name} (engine) imports {i}" for i in sorted(imports - ENGINE_MAY_IMPORT) if not _in_jsonio(i)]
        if name == "fair_retrieval.validate":
            found += [f"{name} (a leaf the engine imports) imports {i}" for i in sorted(imports)]
        if _in_jsonio(name):
            found += [
                f"{name} (jsonio, which the engine imports) imports {i}" for i in sorted(imports) if not _in_jsonio(i)
            ]
    return found


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


def _in_jsonio(name: str) -> bool:
    return name == JSONIO or name.startswith(f"{JSONIO}.")


def test_imports_run_one_way() -> None:
    assert violations() == []


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
    assert "llamaindex-vector-stores/llama_index/vector_stores/fair/vector_store.py" in scanned
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
        "    from fair_retrieval.attention import Pooling\n"
    )
    flagged = adapter_violations(source, "probe.py")
    assert [message.split(" imports ")[1].split(";")[0] for message in flagged] == [
        "fair_retrieval.attention",
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
