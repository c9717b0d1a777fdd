"""What an `embed_documents` call reports (`EmbeddingReport.of`) from its `DocumentPlan`, and the plans' numbers."""

from __future__ import annotations

import numpy as np

from fair_retrieval.embedding.embedder import DocumentPlan as PlanFromEmbedder
from fair_retrieval.embedding.embedder import EmbeddingReport as ReportFromEmbedder
from fair_retrieval.embedding.embedding_report import EmbeddingReport
from fair_retrieval.embedding.windows import DocumentPlan, WindowPiece


def test_the_embedder_still_exports_the_plan_and_the_report() -> None:
    assert PlanFromEmbedder is DocumentPlan and ReportFromEmbedder is EmbeddingReport


def test_a_document_counts_as_calibrated_when_any_of_its_windows_is() -> None:
    windows = {1: [WindowPiece("a b", 2, 0, 3), WindowPiece("b c", 2, 2, 5), WindowPiece("c d", 2, 4, 7)]}
    plan = DocumentPlan.windowing(["short", "long"], [4, 12], windows, overhead=2)
    assert plan.owners == [0, 1, 1, 1] and plan.weights == [2, 2, 2, 2]
    assert plan.spans == [(0, 5), (0, 3), (2, 5), (4, 7)]
    report = EmbeddingReport.of(plan, np.array([False, False, True, False]))
    assert (report.documents, report.windowed, report.windows) == (2, 1, 4)
    assert (report.calibrated, report.calibrated_windows, report.truncated) == (1, 1, 0)
    assert report.summary() == "2 documents, 1 windowed into 4 windows in all, 1 calibrated"


def test_truncating_counts_the_content_tokens_past_the_window() -> None:
    plan = DocumentPlan.truncating(["a", "b"], [10, 40], max_length=32, overhead=2)
    assert plan.weights == [8, 30] and plan.cut_tokens == [0, 8] and plan.truncated == 1
    report = EmbeddingReport.of(plan, np.array([False, False]))
    assert (report.tokens, report.cut_tokens, report.calibrated) == (50, 8, 0)
    assert report.summary() == "2 documents, 1 truncated (16% of all tokens never embedded), 0 calibrated"
