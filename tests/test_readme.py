"""The runnable examples of the project README, executed as written (the Hub id points at the bundled MiniLM)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def _section_block(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"no python example under '## {heading}'"
    return match.group(1)


def test_faiss_index_example(minilm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_section_block("FaissIndex").replace(HUB_ID, minilm), "README:FaissIndex", "exec"), namespace)
    scores, ids = namespace["scores"], namespace["ids"]
    assert ids[0][0] == 11 and scores[0][0] > scores[0][1]
    assert namespace["index"].ids.tolist() == [11]
    assert (tmp_path / "my-index" / "index.faiss").is_file()


def test_python_api_example_runs(minilm: str) -> None:
    code = _section_block("Python API").replace(HUB_ID, minilm)
    texts = ["A short passage.", "Another passage about harbours and ferries. " * 30]
    namespace: dict = {"texts": texts}
    exec(compile(code, "README:Python API", "exec"), namespace)
    assert namespace["docs"].shape == (2, 384) and namespace["queries"].shape == (1, 384)
    assert np.abs(namespace["docs"][1] - namespace["plain"][1]).max() > 1e-3
