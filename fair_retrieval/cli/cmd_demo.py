"""`fair-retrieval demo`: the main job on whole documents, offline, on the bundled MiniLM.

The needle benchmark (invented facts hidden at nine depths of Python's own documentation, `pydoc_data`; no data
needed) makes whole documents of --max-tokens tokens (512 by default: longer than MiniLM's 256-token window), one
chunk each, one question per fact; each of these names its fact's invented person and place. Beside them, questions
a Python user asks about the same prose, mostly in other words than the text's (`reference_questions`). The same
chunks are searched four ways:

1. the stack's embedding: one plain mean-pooled vector per chunk, cut off at the model's window, as LlamaIndex's
   HuggingFaceEmbedding and LangChain's HuggingFaceEmbeddings embed it;
2. BM25 alone: the stores' lexical side;
3. our default store, dense: each chunk kept as the vectors of its windows, found by its best one;
4. our default store, hybrid (its default query mode): that dense side fused with BM25.

It prints nDCG@10 and Recall@10 overall, by where the answer sits (the first, middle or last third of its document)
and by kind of question (names, or other words: where BM25 wins and where meaning does), writes
runs/demo/needle-<N>-stores.png (nDCG@10 by answer position, the four runs) and .json, and shows one question's top
hits from the default store's default query (hybrid) with the window that found each marked » «. With the
defaults it uses about 20 s of CPU time, most of it embedding the windows: 15-25 s on the 2-core machine this project
is built on, longer while other work shares the machine.

--calibration shows the earlier comparison instead: plain vs calibrated pooled document vectors on the needle
benchmark and, when a local copy exists, SQuAD v2 dev with paragraphs joined into ~512-token documents, a plot of
each, and one question answered from a FAISS index of calibrated documents.
"""

from __future__ import annotations

import argparse
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fair_retrieval.cli.common import dump_json, make_embedder, slug
from fair_retrieval.cli.options import (
    add_calibration_arguments,
    add_command,
    calibration_from_args,
    embedder_options,
)

if TYPE_CHECKING:
    from fair_retrieval.stores.search_modes import SearchMode

TOP_K = 10
"""Hits each run returns per question: what nDCG@10 and Recall@10 read."""
WIDTH = 88
"""Characters per printed line of the notes and the example's hits (the table is as wide as it is)."""
SHOWN = 3
"""Hits shown for the example question."""
STACK = "stack's embedding"
"""The label of the run that embeds as the stacks' own embeddings do."""
STORE_RUNS: tuple[tuple[str, SearchMode], ...] = (
    ("BM25", "sparse"),
    ("ours, dense", "dense"),
    ("ours, hybrid", "hybrid"),
)
"""(label, search mode) of the runs through our default store."""
CALIBRATION_ONLY = {"no_squad": "--no-squad", "squad_queries": "--squad-queries", "data_dir": "--data-dir"}
"""The options that only the --calibration comparison reads (it alone uses SQuAD v2)."""


def register(subparsers: Any) -> None:
    """Add the `demo` subcommand."""
    parser = add_command(
        subparsers,
        "demo",
        help="offline demo: the stack's embedding, BM25 and our default store (dense, hybrid) on whole documents",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=512,
        help="document length in tokens (default 512); with --calibration also the model's max length unless "
        "--max-length",
    )
    parser.add_argument("--needle-documents", type=int, default=45, help="needle benchmark size (default 45)")
    parser.add_argument("--query", help="your own question for the example search (default: a late-answer question)")
    parser.add_argument("--output-dir", type=Path, default=Path("runs/demo"), help="where reports and plots go")
    parser.add_argument(
        "--calibration",
        action="store_true",
        help="show the earlier comparison instead: plain vs calibrated pooled vectors, then a FAISS query",
    )
    parser.add_argument("--no-squad", action="store_true", help="with --calibration: skip SQuAD v2 dev")
    parser.add_argument("--squad-queries", type=int, help="with --calibration: a random subset of the SQuAD questions")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="with --calibration: folder with a local copy of squad-v2-dev/dev-v2.0.json (default: "
        "$FAIR_RETRIEVAL_DATA, else the download cache; the demo never downloads)",
    )
    add_calibration_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo: the four runs on the needle documents (or, with --calibration, plain vs calibrated)."""
    check_arguments(args)
    started = time.perf_counter()
    code = _calibration_demo(args) if args.calibration else _stores_demo(args)
    print(f"\ndone in {time.perf_counter() - started:.0f} s")
    return code


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse bad values before any model is loaded.

    Raises:
        ValueError: a size below its minimum, an empty --query, or an option of --calibration without it.
    """
    if args.needle_documents < 1:
        raise ValueError(f"--needle-documents must be at least 1, got {args.needle_documents}.")
    if args.max_tokens < 128:
        raise ValueError(f"--max-tokens must be at least 128 (a needle and some prose), got {args.max_tokens}.")
    if args.squad_queries is not None and args.squad_queries < 1:
        raise ValueError(f"--squad-queries must be at least 1, got {args.squad_queries}.")
    if args.query is not None:
        from fair_retrieval.inputs import check_query

        if not args.query.strip():
            raise ValueError("--query is empty; give the question to search for.")
        check_query(args.query, "--query")
    if not args.calibration:
        given = [flag for name, flag in CALIBRATION_ONLY.items() if getattr(args, name) not in (None, False)]
        if given:
            flags = ", ".join(given)
            raise ValueError(
                f"{flags}: SQuAD v2 is read only with --calibration; add --calibration or leave out {flags}."
            )


# ---------------------------------------------------------------------------------------------------- the main job


def _stores_demo(args: argparse.Namespace) -> int:
    """The stack's embedding, BM25 and our default store (dense, hybrid) on the same needle chunks: the table, the
    plot and report, and one question's top hits with their best windows."""
    from fair_retrieval.embedding.embedder_building import build_embedder
    from fair_retrieval.evaluation.data.needle import build_needle_benchmark
    from fair_retrieval.evaluation.data.reference_questions import with_reference_questions
    from fair_retrieval.evaluation.evaluation_report import build_report, display_name, format_table
    from fair_retrieval.evaluation.external_embedders import huggingface_anchor
    from fair_retrieval.evaluation.metrics import metric_names
    from fair_retrieval.evaluation.plot import plot_by_position
    from fair_retrieval.evaluation.runner import Evaluator

    options = embedder_options(args, calibration=calibration_from_args(args), show_progress_bar=True)
    embedder = build_embedder(options, args.model)
    needles = build_needle_benchmark(embedder.token_lengths, args.max_tokens, num_documents=args.needle_documents)
    task = with_reference_questions(needles, embedder.token_lengths)
    say(
        f"model: {display_name(embedder.model_name)}, a window of {embedder.max_length} tokens; documents of up to "
        f"{args.max_tokens} tokens, one chunk each"
    )
    print()
    anchor = huggingface_anchor(args.model, max_length=args.max_length, device=args.device, batch_size=args.batch_size)
    evaluator = Evaluator(anchor, task, recall_k=(TOP_K,), show_progress_bar=True)
    stack = evaluator.run(STACK, None)
    store, hits, scored = _store_runs(embedder, task, evaluator)

    report = build_report(
        embedder, task, evaluator.grouping_name, [stack, *scored.values()], metric_names(recall_k=(TOP_K,))
    )
    report["by_question_kind"] = by_question_kind([stack, *scored.values()])
    print(format_table(report))
    print(format_kinds(report["by_question_kind"]))
    _print_key(anchor, list(task.corpus.values()))
    name = f"{slug(task.name)}-stores"
    dump_json(report, args.output_dir / f"{name}.json")
    plot = plot_by_position(report, args.output_dir / f"{name}.png")
    print(f"plot:   {plot}\nreport: {args.output_dir / f'{name}.json'}\n")

    qid: str | None = None
    if args.query is None:
        per_query = {mode: run.per_query for mode, run in scored.items()}
        example = _example_question(evaluator.grouping, stack.per_query, per_query)
        qid, question, found = example, task.queries[example], hits["hybrid"][example]
    else:
        question = args.query
        found = _search_one(store, question, embedder.embed_query(question), "hybrid", SHOWN)
    say(f"our default store, hybrid, its default (each hit's best window »marked«) — question: {question!r}")
    for rank, hit in enumerate(found[:SHOWN], start=1):
        _print_hit(rank, hit, task, qid)
    return 0


def _store_runs(
    embedder: Any, task: Any, evaluator: Any
) -> tuple[Any, dict[str, dict[str, list[Any]]], dict[str, Any]]:
    """Our default store of the task's chunks, built with `embedder`; every question's hits in each mode of
    `STORE_RUNS` (mode → question id → hits), and each mode's run scored by `evaluator` (mode → `RunResult`)."""
    from fair_retrieval.stores.store_folder import new_folder_store

    store = new_folder_store(embedder, gpu=False)
    store.add_documents(list(task.corpus.values()), None, task.doc_ids)
    embedded = embedder.embed_queries(list(task.queries.values()), show_progress_bar=True)
    vectors = dict(zip(task.query_ids, embedded, strict=True))
    hits: dict[str, dict[str, list[Any]]] = {}
    scored: dict[str, Any] = {}
    for label, mode in STORE_RUNS:
        hits[mode] = _search(store, task, vectors, mode)
        ranking = {qid: [hit.record.key for hit in found] for qid, found in hits[mode].items()}
        scored[mode] = evaluator.score_ranking(label, ranking)
    return store, hits, scored


def _print_key(anchor: Any, texts: list[str]) -> None:
    """What each run is, and how much of the chunks the stack's embedding never reads."""
    from fair_retrieval.evaluation.external_embedders import token_coverage

    coverage = token_coverage(anchor, texts)
    cut = (
        f"; {coverage.truncated} of {coverage.documents} chunks are longer than its {coverage.max_length}-token "
        f"window, so {coverage.share:.0%} of all tokens are never embedded"
        if coverage is not None and coverage.cut_tokens
        else ""
    )
    say(f"{STACK}: one mean-pooled plain vector per chunk, as HuggingFaceEmbedding(s) make it{cut}")
    say(
        "BM25: the stores' lexical side alone; each needle question repeats its fact's invented names (its person is "
        "named in no other document), so BM25 finds them all; the questions in other words are where meaning helps"
    )
    say(
        "ours: our default store, each chunk kept as the vectors of its windows, found by its best one; hybrid fuses "
        "it with BM25"
    )


def _search(store: Any, task: Any, vectors: Mapping[str, np.ndarray], mode: SearchMode) -> dict[str, list[Any]]:
    """Every question's top hits in `mode` ("sparse", "dense" or "hybrid"), its vector embedded once."""
    return {qid: _search_one(store, task.queries[qid], vectors[qid], mode, TOP_K) for qid in task.query_ids}


def _search_one(store: Any, question: str, vector: np.ndarray, mode: SearchMode, k: int) -> list[Any]:
    """The store's top `k` hits for one question in `mode`, with the question's vector given."""
    from fair_retrieval.stores import SearchSettings

    return list(store.text_search(question, k, lambda _: vector, settings=SearchSettings(mode=mode)))


def _example_question(
    grouping: Mapping[str, list[str]],
    stack: Mapping[str, Mapping[str, float]],
    ours: Mapping[str, Mapping[str, Mapping[str, float]]],
) -> str:
    """A question whose answer is in the last third, that the default store's hybrid query ranks first: one in other
    words that the stack's embedding and BM25 both rank lower if there is one, else one in other words that the
    stack's embedding ranks lower, else any question it ranks lower, else any ranked first, else any.

    Args:
        grouping: position group → question ids.
        stack: the stack's embedding's question id → metric → value.
        ours: search mode → question id → metric → value, for our store's runs.
    """
    from fair_retrieval.evaluation.data.reference_questions import QUESTION_PREFIX

    end = list(grouping.get("end") or next(iter(grouping.values())))
    first = [q for q in end if ours["hybrid"][q]["ndcg@10"] == 1.0]
    lower = [q for q in first if stack[q]["ndcg@10"] < 1.0]
    words = [q for q in lower if q.startswith(QUESTION_PREFIX)]
    both = [q for q in words if ours["sparse"][q]["ndcg@10"] < 1.0]
    return (both or words or lower or first or end)[0]


def by_question_kind(runs: list[Any]) -> dict[str, dict[str, float]]:
    """Mean nDCG@10 of each run by kind of question: "names" (the needle questions, which name their fact's invented
    person and place) and "other words" (the questions about the documentation's own prose); "count" per kind.

    Args:
        runs: `RunResult`s of one task.

    Returns:
        kind → {run label → mean nDCG@10, "count" → questions}; a kind with no questions is left out.
    """
    from fair_retrieval.evaluation.data.reference_questions import QUESTION_PREFIX

    questions = list(runs[0].per_query)
    kinds = {
        "names": [q for q in questions if not q.startswith(QUESTION_PREFIX)],
        "other words": [q for q in questions if q.startswith(QUESTION_PREFIX)],
    }
    table: dict[str, dict[str, float]] = {}
    for kind, ids in kinds.items():
        if ids:
            table[kind] = {run.label: float(np.mean([run.per_query[q]["ndcg@10"] for q in ids])) for run in runs}
            table[kind]["count"] = len(ids)
    return table


def format_kinds(kinds: Mapping[str, Mapping[str, float]]) -> str:
    """The table of `by_question_kind`: a line per kind, a column per run, as wide as the run labels."""
    labels = [label for label in next(iter(kinds.values())) if label != "count"]
    widths = [max(8, len(label)) for label in labels]
    lines = ["nDCG@10 by question".ljust(24) + "  ".join(f"{x:>{w}}" for x, w in zip(labels, widths, strict=True))]
    for kind, row in kinds.items():
        name = f"{kind} (n={int(row['count'])})".ljust(24)
        lines.append(name + "  ".join(f"{row[label]:>{w}.4f}" for label, w in zip(labels, widths, strict=True)))
    return "\n".join(lines) + "\n"


def _print_hit(rank: int, hit: Any, task: Any, qid: str | None) -> None:
    """One hit: its id and score, whether it holds the answer, and its best window marked in its text."""
    doc, text = hit.record.key, hit.record.text
    answer = task.positions.get(qid) if qid is not None and doc in task.qrels[qid] else None
    mark = f"  ← relevant; the answer starts {answer.relative:.0%} into the chunk" if answer is not None else ""
    print(f"  {rank}. {doc} (score {hit.score:.3f}){mark}")
    window = hit.best_window
    if window is None:
        return
    start, end = window["start"], window["end"]
    inside = answer is not None and start <= answer.char_start < end
    where = "; it holds the answer" if inside else ""
    print(f"     best window: characters {start}–{end} of {len(text)}{where}")
    span = (answer.char_start, answer.char_end) if answer is not None and inside else None
    say(marked_window(text, start, end, span), indent="     ")


def say(text: str, indent: str = "") -> None:
    """Print `text` wrapped at `WIDTH` characters, its lines after the first indented two more than `indent`."""
    print(textwrap.fill(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False))


def marked_window(text: str, start: int, end: int, answer: tuple[int, int] | None = None, width: int = 90) -> str:
    """`text` on one line with its window [start, end) between » and «, shortened for a terminal: a little of the
    text on either side, the window's first and last `width` characters and, when `answer` (a character span) lies
    inside, the answer with some context; what is left out is "…", each piece cut at spaces."""
    keep = [(start, start + width), (end - width, end)]
    if answer is not None:
        keep.append((answer[0] - width // 3, answer[1] + width // 3))
    pieces: list[list[int]] = []
    for low, high in sorted((max(start, low), min(end, high)) for low, high in keep):
        if pieces and low <= pieces[-1][1] + width // 3:  # a short gap is shown rather than left out
            pieces[-1][1] = max(pieces[-1][1], high)
        else:
            pieces.append([low, high])
    inner = " … ".join(_words(text, low, high, low == start, high == end) for low, high in pieces)
    before = _words(text, max(0, start - width // 3), start, start <= width // 3, True)
    after = _words(text, end, min(len(text), end + width // 3), True, end + width // 3 >= len(text))
    head = ("…" if start > width // 3 else "") + before
    tail = after + ("…" if end + width // 3 < len(text) else "")
    return f"{head} »{inner}« {tail}".strip()


def _words(text: str, low: int, high: int, exact_start: bool, exact_end: bool) -> str:
    """text[low:high] on one line, a word cut at either end left out unless that end is `exact_*`."""
    piece = text[low:high]
    words = piece.split()
    if not exact_start and low > 0 and words and not text[low - 1].isspace() and not piece[0].isspace():
        words = words[1:]
    if not exact_end and high < len(text) and words and not text[high].isspace() and not piece[-1].isspace():
        words = words[:-1]
    return " ".join(words)


# ---------------------------------------------------------------------------------------------------- --calibration


def _calibration_demo(args: argparse.Namespace) -> int:
    """Plain vs calibrated pooled vectors on the needle benchmark (and SQuAD v2 dev when present), plots, reports,
    then one question answered from a FAISS index of calibrated documents."""
    from fair_retrieval.engine.calibration import Calibration

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
        qid = _calibrated_example(task, evaluator, runs)
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


def _calibrated_example(task: Any, evaluator: Any, runs: Any) -> str:
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
