"""Execute every cookbook notebook in place, so the committed files carry their outputs and plots.

    HF_HUB_OFFLINE=1 python cookbook/execute.py            # all notebooks
    HF_HUB_OFFLINE=1 python cookbook/execute.py c_*.ipynb  # some of them

The tests (tests/test_cookbook.py) run every notebook again from cleared outputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

COOKBOOK = Path(__file__).resolve().parent


def main(patterns: list[str]) -> int:
    paths = sorted({p for pattern in (patterns or ["*.ipynb"]) for p in COOKBOOK.glob(pattern)})
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        client = NotebookClient(
            notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(COOKBOOK)}}
        )
        client.execute()
        nbformat.write(notebook, path)
        print(f"executed {path.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
