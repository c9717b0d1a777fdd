"""This package's README: its python example runs as written (offline: the Hub id resolves to the bundled MiniLM),
and its install command names this package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_readme_installs_this_package() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.startswith("# llama-index-vector-stores-fair\n")
    assert re.search(r"^pip install .*\./integrations/llamaindex-vector-stores\[faiss\]", text, re.MULTILINE)


def test_the_readme_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import huggingface_hub.constants

    [code] = BLOCK.findall(README.read_text(encoding="utf-8"))
    assert "from llama_index.vector_stores.fair import FairFaissVectorStore" in code
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{README.name} (python block)", "exec"), {"__name__": "__readme__"})
    assert "railway museum" in capsys.readouterr().out
    assert (tmp_path / "storage" / "default__vector_store.json").is_file()
