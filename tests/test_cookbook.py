"""Execute every cookbook notebook end to end, offline, the way a reader would run it.

Notebooks are committed executed, with their outputs and plots, so a reader on a code host sees the results without
running anything. Here each one runs again, from cleared outputs, in a fresh Jupyter kernel with cookbook/ as its
working directory. A cell that raises fails the test (nbclient's CellExecutionError shows the cell and the traceback).
Refresh the committed outputs with `python cookbook/execute.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

COOKBOOK = Path(__file__).resolve().parents[1] / "cookbook"
NOTEBOOKS = sorted(COOKBOOK.glob("*.ipynb"))

# Lines a notebook must print when its story holds together (checked in the executed outputs).
EXPECTED_OUTPUT = {
    "a_llamaindex_late_answers": [
        "plain: {'MRR'",
        "fair:  {'MRR'",
        "holds the answer",
        "FairEmbedding                     15 chunks, 0% of chunk tokens never embedded",
    ],
    "b_langchain_faiss_store": [
        "same results: True",
        "refused: metadatas[0]['published'] is a date",
        "29 documents",
        "FairEmbeddings                     30 chunks, 0% of chunk tokens never embedded",
    ],
    "c_diagnose_position_bias": ["needle@512", "probes:python-docs: 150 queries, 60 documents"],
}


def _text_outputs(notebook: nbformat.NotebookNode) -> str:
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output.get("text", ""))
            elif "data" in output:
                parts.append(output["data"].get("text/plain", ""))
    return "\n".join(parts)


def test_cookbook_has_notebooks() -> None:
    assert {path.stem for path in NOTEBOOKS} >= set(EXPECTED_OUTPUT)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs_end_to_end(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells, f"{path.name} has no code"
    for cell in code_cells:  # committed executed, so readers see the results; then run again from scratch
        assert cell.get("execution_count"), f"{path.name} is committed unexecuted: run python cookbook/execute.py"
        cell["outputs"], cell["execution_count"] = [], None

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # inherited by the kernel
    resources = {"metadata": {"path": str(COOKBOOK)}}  # the working directory, as when opened from cookbook/
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources=resources).execute()

    assert all(cell.get("execution_count") for cell in code_cells)
    printed = _text_outputs(notebook)
    assert "Traceback" not in printed
    for expected in EXPECTED_OUTPUT.get(path.stem, []):
        assert expected in printed, f"{path.name} did not print {expected!r}"
