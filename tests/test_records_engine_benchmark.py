"""benchmarks/records_engine.py on a few records: both engines hold every record, and every figure is reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_modules import load_benchmark


def test_both_engines_keep_every_record_and_report_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records_engine = load_benchmark("records_engine")
    assert records_engine.main(["--sizes", "40,90", "--writes", "3", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())
    assert [row["records"] for row in rows] == [40, 90]
    for row in rows:
        assert all(row[name] > 0 for name in row), row
    assert "| 90 |" in capsys.readouterr().out
    entries = records_engine.records(5, 4, seed=2)
    assert entries == records_engine.records(5, 4, seed=2) and json.loads(entries[3])["id"] == "doc-3"
    with pytest.raises(SystemExit, match="--sizes must be counts"):
        records_engine.main(["--sizes", "1"])
