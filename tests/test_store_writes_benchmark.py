"""benchmarks/store_writes.py on a tiny store: every figure is measured on both runs, and the table prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_modules import load_benchmark

pytest.importorskip("faiss")
pytest.importorskip("llama_index.retrievers.bm25")


def test_both_runs_report_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store_writes = load_benchmark("store_writes")
    assert store_writes.main(["--sizes", "60", "--queries", "5", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    assert [row["run"].split()[0] for row in results] == ["ours", "llama-index"]
    for row in results:
        assert row["chunks"] == 60 and row["folder_bytes"] > 0
        assert all(row[column] > 0 for column in store_writes.COLUMNS), row
    assert "| ours (default store, LangChain) | 60 |" in capsys.readouterr().out


def test_chunks_and_queries_are_the_same_every_run() -> None:
    store_writes = load_benchmark("store_writes")
    assert store_writes.chunks(3, 5, seed=1) == store_writes.chunks(3, 5, seed=1)
    assert store_writes.queries(4, seed=7) == store_writes.queries(4, seed=7)
    assert all(3 <= len(query.split()) <= 8 for query in store_writes.queries(50, seed=7))


def test_a_baseline_checkout_is_measured_in_the_same_run(tmp_path: Path) -> None:
    store_writes = load_benchmark("store_writes")
    checkout = Path(__file__).parents[1]  # this checkout as its own baseline: the subprocess path works
    argv = ["--sizes", "40", "--queries", "4", "--no-anchor", "--baseline", str(checkout), "--out", str(tmp_path)]
    assert store_writes.main(argv) == 0
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    assert [row["run"].split(" (")[0] for row in results] == ["ours", f"ours at {checkout.name}"]
    assert all(row[column] > 0 for row in results for column in store_writes.COLUMNS)
    with pytest.raises(SystemExit, match="not a checkout"):
        store_writes.main(["--baseline", str(tmp_path), "--out", str(tmp_path)])


def test_written_bytes_count_new_and_replaced_files_only(tmp_path: Path) -> None:
    store_writes = load_benchmark("store_writes")
    (tmp_path / "kept").write_bytes(b"x" * 10)
    (tmp_path / "replaced").write_bytes(b"y" * 20)
    before = store_writes.files_now(tmp_path)
    (tmp_path / "replaced.new").write_bytes(b"z" * 30)
    (tmp_path / "replaced.new").replace(tmp_path / "replaced")
    (tmp_path / "added").write_bytes(b"w" * 5)
    assert store_writes.written_bytes(before, tmp_path) == 35
