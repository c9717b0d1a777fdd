"""Measuring position bias: benchmarks, metrics, evaluation runs and reports.

- Tasks (subpackage `data`): `RetrievalTask` (corpus, queries, qrels, answer positions); builders for SQuAD-format
  position benchmarks (`build_position_benchmark`), the synthetic needle benchmark (`build_needle_benchmark`), BEIR
  folders and SciFact (`load_beir`, `load_scifact`), and the Hub formats of FineWeb-PosQ, SQuAD-PosQ, PosIR and
  NanoBEIR (`hub`); `load_task` turns a `--data` value into a task.
- Grouping by answer position (thirds, finer bins, SQuAD-PosQ char buckets) and by document length (PosIR).
- Metrics: nDCG@k, Recall@k, PSI, harmonic mean; `Evaluator` runs plain vs calibrated embeddings.
- Reports: terminal table and JSON report (`build_report`, `format_table`, `REPORT_SCHEMA`), PNG plot.
"""

from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.data import hub
from fair_retrieval.evaluation.data.beir import load_beir, load_scifact
from fair_retrieval.evaluation.data.load import load_task
from fair_retrieval.evaluation.data.needle import build_needle_benchmark
from fair_retrieval.evaluation.data.squad import build_position_benchmark
from fair_retrieval.evaluation.data.task import AnswerPosition, RetrievalTask
from fair_retrieval.evaluation.data.tokens import tokenizer_counter
from fair_retrieval.evaluation.evaluation_report import REPORT_SCHEMA, build_report, format_table
from fair_retrieval.evaluation.groups import (
    length_by_position,
    length_quartiles,
    make_grouping,
    position_bins,
    position_thirds,
)
from fair_retrieval.evaluation.metrics import harmonic_mean, ndcg_at_k, position_sensitivity_index, recall_at_k
from fair_retrieval.evaluation.runner import Evaluator, RunResult

__all__ = [
    "REPORT_SCHEMA",
    "AnswerPosition",
    "EmbeddingCache",
    "Evaluator",
    "RetrievalTask",
    "RunResult",
    "build_needle_benchmark",
    "build_position_benchmark",
    "build_report",
    "format_table",
    "harmonic_mean",
    "hub",
    "length_by_position",
    "length_quartiles",
    "load_beir",
    "load_scifact",
    "load_task",
    "make_grouping",
    "ndcg_at_k",
    "position_bins",
    "position_sensitivity_index",
    "position_thirds",
    "recall_at_k",
    "tokenizer_counter",
]
