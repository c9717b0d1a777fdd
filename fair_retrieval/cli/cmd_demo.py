"""`fair-retrieval demo`: see position bias and its fix in a few minutes, offline, on the bundled MiniLM.

1. The needle benchmark (facts hidden at chosen depths of Python's own documentation; no data needed) and, when a
   local copy exists, SQuAD v2 dev with paragraphs joined into ~512-token documents: plain vs calibrated.
2. A plot of nDCG@10 by answer position.
3. One question answered from a FAISS index built with calibrated document embeddings.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval.cli.common import dump_json, make_embedder, slug
from fair_retrieval.cli.options import add_calibration_arguments, add_command, calibration_from_args


def register(subparsers: Any) -> None:
    """Add the `demo` subcommand."""
    parser = add_command(
        subparsers,
        "demo",
        help="offline demo: position bias of plain embeddings, what calibration removes, a plot, a FAISS query",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--max-tokens", type=int, default=512, help="document length in tokens (default 512)")
    parser.add_argument("--needle-documents", type=int, default=45, help="needle benchmark size (default 45)")
    parser.add_argument("--no-squad", action="store_true", help="skip SQuAD v2 dev even when the data is present")
    parser.add_argument("--squad-queries", type=int, help="use a random subset of the SQuAD questions")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="folder with a local copy of squad-v2-dev/dev-v2.0.json (default: $FAIR_RETRIEVAL_DATA, else the "
        "download cache; the demo never downloads)",
    )
    parser.add_argument("--query", help="your own question for the FAISS example (default: a late-answer question)")
    parser.add_argument("--output-dir", type=Path, default=Path("runs/demo"), help="where reports and plots go")
    add_calibration_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo; print the comparison, write plots and reports, answer one query from a FAISS index."""
    from fair_retrieval.engine.calibration import Calibration

    started = time.perf_counter()
    calibration = calibration_from_args(args) or Calibration()
    embedder = make_embedder(args, calibration)
    print(
        f"model: {embedder.model_name} ({embedder.pooling} pooling, {embedder.num_layers} layers), "
        f"documents ≤ {args.max_tokens} tokens"
    )
    print(f"calibration: {calibration.to_json()}\n")

    from fair_retrieval.evaluation.data.needle import build_needle_benchmark

    tasks = [build_needle_benchmark(embedder.token_lengths, args.max_tokens, num_documents=args.needle_documents)]
    squad = None if args.no_squad else _squad_task(args, embedder)
    if squad is not None:
        tasks.append(squad)
    last: tuple[Any, Any, np.ndarray, dict[str, Any]] | None = None
    for task in tasks:
        last = _compare(embedder, task, calibration, args.output_dir)
    assert last is not None
    _answer_one(embedder, *last, query=args.query)
    print(f"\ndone in {time.perf_counter() - started:.0f} s")
    return 0


def _squad_task(args: argparse.Namespace, embedder: Any) -> Any:
    from fair_retrieval.evaluation.data.dataset_locations import find_local
    from fair_retrieval.evaluation.data.squad import build_position_benchmark

    root = find_local("squad-v2", args.data_dir)
    if root is None:
        print(
            "(SQuAD v2 dev not found locally — `fair-retrieval eval --data squad-v2` downloads it once, or set "
            "FAIR_RETRIEVAL_DATA / --data-dir to a copy; showing the needle benchmark only)\n"
        )
        return None
    path = root / "squad-v2-dev" / "dev-v2.0.json"
    task = build_position_benchmark(path, embedder.token_lengths, args.max_tokens, "squad-v2")
    return task.subsample_queries(args.squad_queries)


def _compare(embedder: Any, task: Any, calibration: Any, output_dir: Path) -> tuple[Any, Any, np.ndarray, Any]:
    """Evaluate plain vs calibrated on `task`; print, plot, save; return what the FAISS example needs."""
    from fair_retrieval.evaluation.evaluation_report import build_report, format_table
    from fair_retrieval.evaluation.metrics import metric_names
    from fair_retrieval.evaluation.plot import plot_by_position
    from fair_retrieval.evaluation.runner import Evaluator

    evaluator = Evaluator(embedder, task, show_progress_bar=True)
    plain = evaluator.run("plain", None)
    documents, seconds = evaluator.document_embeddings(calibration)
    calibrated = evaluator.score("calibrated", documents, calibration, seconds)
    report = build_report(embedder, task, evaluator.grouping_name, [plain, calibrated], metric_names())
    print(format_table(report))
    if plain.psi is not None and calibrated.psi is not None:
        late_plain, late_cal = plain.groups["end"]["ndcg@10"], calibrated.groups["end"]["ndcg@10"]
        early = plain.groups["begin"]["ndcg@10"]
        print(
            f"→ plain embeddings find late answers worse: nDCG@10 {early:.3f} (begin) vs {late_plain:.3f} (end), "
            f"PSI {plain.psi:.3f}."
        )
        removed = (plain.psi - calibrated.psi) / plain.psi if plain.psi > 0 else 0.0
        print(
            f"→ calibrated documents: end {late_cal:.3f}, PSI {calibrated.psi:.3f} "
            f"({removed:.0%} of the position bias removed), overall nDCG@10 "
            f"{calibrated.overall['ndcg@10'] - plain.overall['ndcg@10']:+.3f}."
        )
    name = slug(task.name)
    dump_json(report, output_dir / f"{name}.json")
    plot = plot_by_position(report, output_dir / f"{name}.png")
    print(f"plot: {plot}   report: {output_dir / f'{name}.json'}\n")
    return task, evaluator, documents, (plain, calibrated)


def _answer_one(embedder: Any, task: Any, evaluator: Any, documents: np.ndarray, runs: Any, query: str | None) -> None:
    """Build a FAISS index of the calibrated documents and answer one question from it."""
    from fair_retrieval.index import FaissIndex

    index = FaissIndex(documents.shape[1], metric="ip", kind="flat", gpu=False)
    index.add(documents, ids=np.arange(len(documents), dtype=np.int64))
    doc_ids = task.doc_ids
    qid = None
    if query is None:
        qid = _example_query(task, evaluator, runs)
        query = task.queries[qid]
    scores, found = index.search(embedder.embed_queries([query]), k=3)
    print(f"FAISS index of {len(index)} calibrated {task.name} documents — question: {query!r}")
    for rank, (score, position) in enumerate(zip(scores[0], found[0], strict=True), start=1):
        doc = doc_ids[int(position)]
        mark = ""
        if qid is not None and doc in task.qrels[qid]:
            where = task.positions[qid]
            mark = f"  ← relevant; the answer starts {where.relative:.0%} into the document"
        print(f"  {rank}. {doc} (score {score:.3f}){mark}")
        if rank == 1:
            print(f"     {_snippet(task, doc, qid)}")


def _example_query(task: Any, evaluator: Any, runs: Any) -> str:
    """A question whose answer is in the last third, found first with calibration (and not with plain if any)."""
    plain, calibrated = runs
    end = evaluator.grouping.get("end") or list(task.queries)
    gained = [q for q in end if calibrated.per_query[q]["ndcg@10"] == 1.0 and plain.per_query[q]["ndcg@10"] < 1.0]
    found = [q for q in end if calibrated.per_query[q]["ndcg@10"] == 1.0]
    return (gained or found or end)[0]


def _snippet(task: Any, doc: str, qid: str | None, width: int = 220) -> str:
    text = task.corpus[doc]
    if qid is not None and doc in task.qrels[qid] and qid in task.positions:
        where = task.positions[qid]
        start = max(0, where.char_start - width // 3)
        piece = text[start : where.char_start] + "«" + text[where.char_start : where.char_end] + "»"
        piece += text[where.char_end : where.char_end + width // 3]
        return ("…" if start > 0 else "") + " ".join(piece.split()) + "…"
    return " ".join(text[:width].split()) + "…"
