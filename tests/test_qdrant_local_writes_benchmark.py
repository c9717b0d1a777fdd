"""benchmarks/qdrant_local_writes.py on a tiny collection: every figure is measured, also on a baseline checkout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_modules import load_benchmark

pytest.importorskip("qdrant_client")


def test_every_figure_is_measured_here_and_on_the_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    benchmark = load_benchmark("qdrant_local_writes")
    checkout = Path(__file__).parents[1]
    assert benchmark.main(["--sizes", "20", "--baseline", str(checkout), "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    assert [row["run"] for row in results] == ["this checkout", f"{checkout.name} (baseline)"]
    assert all(row[column] > 0 for row in results for column in benchmark.COLUMNS)
    assert "| this checkout | 20 |" in capsys.readouterr().out
