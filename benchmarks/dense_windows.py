"""The dense window study: which window shape of our store reaches LlamaIndex's documented multi-size recipe
(docs/dense_window_study.md has the rule, written before the run).

Per (set, stack): the stack's default splitter makes the chunks (as benchmarks/hybrid.py does); the embedder the
stores use embeds every chunk once per window size (`embed_document_windows(..., window_tokens=n,
window_boundaries="text")`, the calls a store makes); each candidate shape scores a chunk by its best window of
its sizes, top 20. Baselines in the same run: the recipe, BM25, our lexical side, BM25 fused with the recipe, and
(on `--store-sets`) our default store built through the stack's adapter, whose ranking the `whole+half` candidate
must reproduce. Window vectors and results are saved as they are made, so an interrupted study resumes.

    python benchmarks/dense_windows.py --model MODEL --out runs/dense-windows-minilm
    python benchmarks/dense_windows.py --model MODEL --out runs/dense-windows-minilm --pooled
    python benchmarks/dense_windows.py --report --out runs/dense-windows-minilm,runs/dense-windows-e5

The budget round (docs/dense_window_study.md, "Under today's budget") adds absolute window sizes (`TOKENS`) and CACM,
and decides on memory a chunk (two `store_scale.py` runs) and build time (`store_build_speed.py --shapes budget`):

    python benchmarks/dense_windows.py --report --out runs/dw3-minilm,runs/dw3-e5 \
        --scale store-scale-200000.json,store-scale-200000-whole+half+quarter.json --build minilm.json,e5.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

import hybrid
import numpy as np
import pipelines_runs
from pipelines_data import Chunk

from fair_retrieval import FairEmbedder
from fair_retrieval.evaluation.bootstrap import paired_bootstrap
from fair_retrieval.lexical import LANGUAGES, LexicalIndex, LexicalSettings, fuse

logger = logging.getLogger("dense_windows")

SHARES = {"whole": 1.0, "half": 0.5, "quarter": 0.25}
"""Window sizes as shares of the embedder's window content (rounded up), each cut at the text's boundaries."""
TOKENS = {"t128": 128, "t256": 256, "t512": 512}
"""Absolute window sizes in content tokens, held to the embedder's window content (the budget round)."""
CANDIDATES: dict[str, tuple[str, ...]] = {
    "whole+half": ("whole", "half"),
    "whole+half+quarter": ("whole", "half", "quarter"),
    "half+quarter": ("half", "quarter"),
    "whole+quarter": ("whole", "quarter"),
    "half": ("half",),
    "quarter": ("quarter",),
}
"""The shapes of the rule; `whole+half` is today's default (`DEFAULT_WINDOW_SHARES`)."""
TOKEN_CANDIDATES: dict[str, tuple[str, ...]] = {
    "t128": ("t128",),
    "t256": ("t256",),
    "t128+t256": ("t128", "t256"),
    "t128+t256+t512": ("t128", "t256", "t512"),
    "whole+t128": ("whole", "t128"),
}
"""The absolute-size shapes of the budget round (docs/dense_window_study.md, "Under today's budget")."""
BUDGET_CANDIDATES = {**CANDIDATES, **TOKEN_CANDIDATES}
BUILD_FACTOR = 3.0  # the budget round: a shape's store builds in at most 3 × the pooled store's time
CLEARLY_WORSE = -0.005  # the budget round: no run's upper bound below this
TODAY = "whole+half"
ONE_PASS = ("whole+half", "whole+half+quarter")
LEXICAL_WINDOWS = ("whole", "half", "whole+half")
"""`whole+half`: every window the default store keeps (both sizes, a span kept once), added after MiniLM's `whole` and
`half` runs were seen: the windows a store can give its lexical side without recording which size each one is."""
"""Window sizes the per-window lexical candidates index (BM25 over windows, a chunk by its best window)."""
"""The shapes measured from one pass too (`FairEmbedder.embed_multiscale_windows`)."""
POOLED = ("pooled+half", "pooled")
"""`pooled+half`: each chunk's pooled vector (what LlamaIndex's `FairEmbedding` gives a node) as one more window beside
its `half` windows; `pooled` alone (our pooled store) is its control, reported only."""
POOLED_SETS = ("squad-v2", "xquad-en", "reddit")
"""The sets the pooled+half rule judges; the others are reported."""
RECIPE = "multi-size"
HYBRID = ("relative_score", 0.3)  # the stores' hybrid fusion
TOLERANCE, LOWER_BOUND, MIN_QUESTIONS, TIE, GAIN = 0.005, -0.01, 100, 0.002, 0.005


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--sets", default="squad-v2,reddit,needle,xquad-en,scifact", help="comma-separated sets")
    parser.add_argument("--stacks", default="llamaindex,langchain", help="comma-separated stacks")
    parser.add_argument("--store-sets", default="squad-v2", help="sets where our default store is built and checked")
    parser.add_argument("--squad-articles", type=int, default=6)
    parser.add_argument("--reddit-posts", type=int, default=320)
    parser.add_argument("--xquad-articles", type=int, default=8)
    parser.add_argument("--scifact-abstracts", type=int, default=800, help="corpus: judged abstracts + others")
    parser.add_argument("--cacm-documents", type=int, default=600, help="corpus: judged documents + others")
    parser.add_argument("--out", default="runs/dense-windows", help="folder of results.json (resumed)")
    parser.add_argument("--threads", type=int, default=1, help="torch and faiss threads")
    parser.add_argument(
        "--one-pass", action="store_true", help="add the one-pass candidates to the sets whose two-pass runs are done"
    )
    parser.add_argument(
        "--pooled",
        action="store_true",
        help="add pooled+half (the chunks' pooled vectors beside their half windows) to the sets whose two-pass runs "
        "are done",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="only write the tables and the rule's outcome; --out may name several folders (comma-separated, one "
        "per model), which the rule is decided on together",
    )
    parser.add_argument(
        "--scale",
        default=None,
        help="with --report: the budget round's two store_scale.py reports (comma-separated JSON files)",
    )
    parser.add_argument(
        "--build",
        default=None,
        help="with --report: the budget round's store_build_speed.py --shapes reports, one per model (comma-separated)",
    )
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------------------------- runs


def size_tokens(size: str, content: int) -> int:
    """A size's window in content tokens: a share of the window (rounded up) or an absolute size held to it."""
    if size in SHARES:
        return max(1, math.ceil(content * SHARES[size]))
    return min(TOKENS[size], content)


def texts_digest(texts: list[str]) -> str:
    """The SHA-256 of `texts` (each one's length and text), which a pass saved since the budget round records."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(f"{len(text)}:{text}".encode())
    return digest.hexdigest()


def fits(path: Path, texts: list[str]) -> bool:
    """Whether a cached pass is of these texts: the texts' digest where it records one, else (a pass of the first
    round) a window for each text and every span inside its text."""
    with np.load(path) as saved:
        if "texts" in saved.files:
            return str(saved["texts"]) == texts_digest(texts)
        owners, spans = saved["owners"], saved["spans"]
    lengths = np.array([len(t) for t in texts])
    return int(owners.max()) == len(texts) - 1 and not bool((spans[:, 1] > lengths[owners]).any())


def window_passes(
    embedder: FairEmbedder | None, texts: list[str], cache: Path, sizes: tuple[str, ...] = (*SHARES, *TOKENS)
) -> dict[str, dict[str, np.ndarray]]:
    """Each size's windows of `texts` (vectors, owners, spans), one `embed_document_windows` call per distinct size
    in tokens (a size held to the tokens of another shares its pass), kept in `cache` (an .npz per size) so a
    resumed study does not embed again. A cached pass that does not fit `texts` (when given) is made again."""
    passes: dict[str, dict[str, np.ndarray]] = {}
    for size in sizes:
        path = cache / f"{size}.npz"
        if path.exists() and texts and not fits(path, texts):
            if embedder is None:
                raise ValueError(f"{path} does not fit these {len(texts)} chunks: run with its settings.")
            logger.warning("%s does not fit these %d chunks (another run's): made again", path, len(texts))
            path.unlink()
        if not path.exists():
            if embedder is None:
                raise FileNotFoundError(f"{path} is missing: run the two-pass study of this set first.")
            tokens = size_tokens(size, embedder.window_content_tokens)
            same = [s for s, p in passes.items() if int(p["tokens"]) == tokens]
            if same:
                windows, seconds = passes[same[0]], 0.0
                logger.info("%s: %s windows are %s's (%d tokens)", cache.name, size, same[0], tokens)
                vectors, owners, spans = windows["vectors"], windows["owners"], windows["spans"]
            else:
                started = time.perf_counter()
                made = embedder.embed_document_windows(texts, window_tokens=tokens, window_boundaries="text")
                seconds = time.perf_counter() - started
                vectors, owners, spans = made.vectors, made.owners, made.spans
                logger.info("%s: %d windows of %d tokens in %.1f s", cache.name, len(owners), tokens, seconds)
            cache.mkdir(parents=True, exist_ok=True)
            np.savez(
                path,
                vectors=vectors,
                owners=owners,
                spans=spans,
                tokens=tokens,
                seconds=seconds,
                texts=texts_digest(texts),
            )
        with np.load(path) as saved:
            passes[size] = {name: saved[name] for name in saved.files}
    return passes


def shape_windows(passes: dict[str, dict[str, np.ndarray]], sizes: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The window vectors and owners a store of these sizes keeps: every size's windows, a window with the span of
    one already kept for its document kept once (as the stores merge their passes)."""
    vectors = np.concatenate([passes[s]["vectors"] for s in sizes])
    owners = np.concatenate([passes[s]["owners"] for s in sizes])
    spans = np.concatenate([passes[s]["spans"] for s in sizes])
    _, first = np.unique(np.column_stack([owners, spans]), axis=0, return_index=True)
    keep = np.sort(first)
    return vectors[keep], owners[keep]


def best_window_rankings(
    vectors: np.ndarray, owners: np.ndarray, queries: np.ndarray, chunk_ids: list[str]
) -> list[list[tuple[str, float]]]:
    """Each query's top chunks by their best window (the highest inner product), with that score."""
    order = np.argsort(owners, kind="stable")
    sorted_owners = owners[order]
    starts = np.flatnonzero(np.r_[True, sorted_owners[1:] != sorted_owners[:-1]])
    scores = queries @ vectors[order].T  # (Q, W), windows grouped by chunk
    best = np.full((len(queries), len(chunk_ids)), -np.inf, dtype=np.float32)
    best[:, sorted_owners[starts]] = np.maximum.reduceat(scores, starts, axis=1)
    depth = min(hybrid.DEPTH, len(chunk_ids))
    rankings = []
    for row in best:
        top = np.argsort(-row, kind="stable")[:depth]
        rankings.append([(chunk_ids[i], float(row[i])) for i in top])
    return rankings


def run_set(name: str, stack: str, model: str, reference: FairEmbedder, args: argparse.Namespace, results: dict):
    key = f"{name}/{stack}"
    entry = results.setdefault(key, {"runs": {}})
    chunks, questions, qrels, language = hybrid.set_chunks(name, stack, model, reference, args)
    queries = reference.embed_queries([q.text for q in questions])
    qids = [q.qid for q in questions]
    chunk_ids = [c.cid for c in chunks]
    entry.update(chunks=len(chunks), questions=len(questions), language=language)
    top: dict[str, list[list[tuple[str, float]]]] = {}

    def keep(run: str, rankings: list[list[tuple[str, float]]], costs: dict[str, Any] | None = None) -> None:
        top[run] = rankings
        result = hybrid.scored({q: [i for i, _ in r[: hybrid.K]] for q, r in zip(qids, rankings, strict=True)}, qrels)
        entry["runs"][run] = {**result, **(costs or {})}
        if run in ("bm25", "lexical", RECIPE):  # kept for a resumed study
            entry["runs"][run]["top"] = [[[i, s] for i, s in r] for r in rankings]
        logger.info("%s %s: nDCG@10 %.4f", key, run, result["ndcg@10"])

    known = set(chunk_ids)
    for run in ("bm25", "lexical", RECIPE):
        saved = entry["runs"].get(run)
        # a resumed run's rankings only where they name these chunks (LlamaIndex's node ids are new on every split)
        if saved is not None and "top" in saved and all(i in known for r in saved["top"] for i, _ in r):
            top[run] = [[(i, s) for i, s in r] for r in saved["top"]]
            continue
        started = time.perf_counter()
        if run == "bm25":
            keep(run, hybrid.bm25_run(chunks, questions, language), {"seconds": time.perf_counter() - started})
        elif run == "lexical":
            keep(run, *hybrid.lexical_run(chunks, questions, language))
        else:
            rankings, costs = hybrid.multi_size_run(stack, model, chunks, questions, queries)
            keep(run, [hybrid.ranked(r) for r in rankings], costs)
        hybrid.save(results, args)

    # the embedder both stacks' default embeddings build (LangChain's builds its own lazily; the same options)
    embedder = pipelines_runs.make_embedding("llamaindex", "default", model).embedder
    passes = window_passes(embedder, [c.text for c in chunks], Path(args.out) / "windows" / name / stack)
    entry["window_tokens"] = {size: int(p["tokens"]) for size, p in passes.items()}
    entry["window_seconds"] = {size: float(p["seconds"]) for size, p in passes.items()}
    unit_queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    for candidate, sizes in BUDGET_CANDIDATES.items():
        vectors, owners = shape_windows(passes, sizes)
        costs = {
            "vectors_per_chunk": len(owners) / len(chunks),
            "embed_s": sum(float(passes[s]["seconds"]) for s in sizes),
        }
        keep(candidate, best_window_rankings(vectors, owners, unit_queries, chunk_ids), costs)
        pairs = zip(top[candidate], top["lexical"], strict=True)
        keep(f"hybrid:{candidate}", [fuse(d, x, hybrid.DEPTH, fusion=HYBRID[0], alpha=HYBRID[1]) for d, x in pairs])
    pairs = zip(top[RECIPE], top["bm25"], strict=True)
    keep(
        "bm25+multi-size",
        [fuse(hybrid.ranked([i for i, _ in d]), hybrid.ranked([i for i, _ in b]), hybrid.DEPTH) for d, b in pairs],
    )
    if name in args.store_sets.split(","):
        rankings, costs, _, _ = hybrid.dense_run(stack, model, chunks, questions, queries, language)
        keep("dense", rankings, costs)
        same = sum(
            [i for i, _ in a[: hybrid.K]] == [i for i, _ in b[: hybrid.K]]
            for a, b in zip(rankings, top[TODAY], strict=True)
        )
        entry["store_check"] = {"same_top10": same, "questions": len(questions)}
        logger.info("%s: the store's top 10 equals %s's for %d / %d questions", key, TODAY, same, len(questions))
    entry["done"] = True
    hybrid.save(results, args)


def one_pass_set(name: str, stack: str, model: str, reference: FairEmbedder, args: argparse.Namespace, results: dict):
    """The one-pass candidates of a set whose two-pass runs are done: one `embed_multiscale_windows` call at every
    size (the smaller windows pooled from the whole windows' token states), each shape's windows picked from it by
    the spans its two-pass windows have; with their hybrid fusions and the seconds of that one call."""
    key = f"{name}/{stack}"
    entry = results[key]
    chunks, questions, qrels, language = hybrid.set_chunks(name, stack, model, reference, args)
    queries = reference.embed_queries([q.text for q in questions])
    unit_queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    qids = [q.qid for q in questions]
    # computed again, not read from the two-pass run: LlamaIndex's node ids are new on every split
    lexical = hybrid.lexical_run(chunks, questions, language)[0]
    cache = Path(args.out) / "windows" / name / stack
    passes = window_passes(None, [], cache, tuple(SHARES))  # saved by the two-pass run
    path = cache / "one-pass.npz"
    if not path.exists():
        embedder = pipelines_runs.make_embedding("llamaindex", "default", model).embedder
        window_tokens = tuple(int(passes[s]["tokens"]) for s in SHARES)
        started = time.perf_counter()
        windows = embedder.embed_multiscale_windows(
            [c.text for c in chunks], window_tokens=window_tokens, window_boundaries="text"
        )
        seconds = time.perf_counter() - started
        np.savez(path, vectors=windows.vectors, owners=windows.owners, spans=windows.spans, seconds=seconds)
    with np.load(path) as saved:
        one = {name_: saved[name_] for name_ in saved.files}
    one_keys = {
        (int(o), int(a), int(b)): row for row, (o, (a, b)) in enumerate(zip(one["owners"], one["spans"], strict=True))
    }
    entry["one_pass_seconds"] = float(one["seconds"])
    vectors, owners = shape_windows(passes, CANDIDATES[TODAY])
    dense = best_window_rankings(vectors, owners, unit_queries, [c.cid for c in chunks])
    for candidate in ONE_PASS:
        sizes = CANDIDATES[candidate]
        wanted = sorted(
            {
                one_keys[(int(o), int(a), int(b))]
                for s in sizes
                for o, (a, b) in zip(passes[s]["owners"], passes[s]["spans"], strict=True)
            }
        )
        rankings = best_window_rankings(
            one["vectors"][wanted], one["owners"][wanted], unit_queries, [c.cid for c in chunks]
        )
        run = f"one-pass:{candidate}"
        result = hybrid.scored({q: [i for i, _ in r[: hybrid.K]] for q, r in zip(qids, rankings, strict=True)}, qrels)
        entry["runs"][run] = {**result, "vectors_per_chunk": len(wanted) / len(chunks)}
        fused = [
            fuse(d, x, hybrid.DEPTH, fusion=HYBRID[0], alpha=HYBRID[1]) for d, x in zip(rankings, lexical, strict=True)
        ]
        entry["runs"][f"hybrid:{run}"] = hybrid.scored(
            {q: [i for i, _ in r[: hybrid.K]] for q, r in zip(qids, fused, strict=True)}, qrels
        )
        logger.info("%s %s: nDCG@10 %.4f", key, run, result["ndcg@10"])
    for size in LEXICAL_WINDOWS:
        sizes = tuple(size.split("+"))
        spans = np.concatenate([passes[s]["spans"] for s in sizes])
        owners = np.concatenate([passes[s]["owners"] for s in sizes])
        _, first = np.unique(np.column_stack([owners, spans]), axis=0, return_index=True)
        keep = np.sort(first)
        windowed = window_lexical_run(chunks, questions, language, {"owners": owners[keep], "spans": spans[keep]})
        fused = [
            fuse(d, x, hybrid.DEPTH, fusion=HYBRID[0], alpha=HYBRID[1]) for d, x in zip(dense, windowed, strict=True)
        ]
        for run, rankings in ((f"lexical:{size}-windows", windowed), (f"hybrid:{TODAY}:lexical-{size}-windows", fused)):
            entry["runs"][run] = hybrid.scored(
                {q: [i for i, _ in r[: hybrid.K]] for q, r in zip(qids, rankings, strict=True)}, qrels
            )
            logger.info("%s %s: nDCG@10 %.4f", key, run, entry["runs"][run]["ndcg@10"])
    if "small-to-big" not in entry["runs"]:  # the hybrid rule's other fused baseline
        pipelines_runs.K = hybrid.DEPTH  # its top 20 children, as the fusion retrievers take them
        rankings, costs = pipelines_runs.small_to_big_run(stack, model, chunks, questions, queries, reference)
        bm25 = hybrid.bm25_run(chunks, questions, language)
        fused = [
            fuse(hybrid.ranked(d), hybrid.ranked([i for i, _ in b]), hybrid.DEPTH)
            for d, b in zip(rankings, bm25, strict=True)
        ]
        for run, ranks in (("small-to-big", [hybrid.ranked(r) for r in rankings]), ("bm25+small-to-big", fused)):
            scored = hybrid.scored({q: [i for i, _ in r[: hybrid.K]] for q, r in zip(qids, ranks, strict=True)}, qrels)
            entry["runs"][run] = {**scored, **(costs if run == "small-to-big" else {})}
            logger.info("%s %s: nDCG@10 %.4f", key, run, scored["ndcg@10"])
    entry["one_pass_done"] = True
    hybrid.save(results, args)


def pooled_set(name: str, stack: str, model: str, reference: FairEmbedder, args: argparse.Namespace, results: dict):
    """`pooled+half` of a set whose two-pass runs are done: each chunk's pooled vector (`embed_documents` of the
    stores' embedder at its defaults: the model's own windows, cut by tokens, their token-weighted mean) as one more
    window beside its cached `half` windows, a chunk scored by its best; `pooled` alone as the control; with their
    hybrid fusions. The pooled pass is timed beside a `whole` pass made again in the same run (the pass pooled+half
    saves), whose windows must equal the cached ones (the same chunks)."""
    key = f"{name}/{stack}"
    entry = results[key]
    chunks, questions, qrels, language = hybrid.set_chunks(name, stack, model, reference, args)
    cache = Path(args.out) / "windows" / name / stack
    passes = window_passes(None, [], cache, tuple(SHARES))  # saved by the two-pass run
    if len(chunks) != entry["chunks"] or any(int(p["owners"].max()) != len(chunks) - 1 for p in passes.values()):
        raise ValueError(f"{key}: {len(chunks)} chunks, the cached run has {entry['chunks']}: run with its settings.")
    texts = [c.text for c in chunks]
    path = cache / "pooled.npz"
    if not path.exists():
        embedder = pipelines_runs.make_embedding("llamaindex", "default", model).embedder
        embedder.embed_documents(texts[:2])  # warm: both timed passes start alike
        started = time.perf_counter()
        pooled = embedder.embed_documents(texts)
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        whole = embedder.embed_document_windows(
            texts, window_tokens=int(passes["whole"]["tokens"]), window_boundaries="text"
        )
        whole_seconds = time.perf_counter() - started
        cached = passes["whole"]
        if not (np.array_equal(whole.owners, cached["owners"]) and np.array_equal(whole.spans, cached["spans"])):
            raise ValueError(f"{key}: the whole windows made again are not the cached ones: run with its settings.")
        drift = float(np.abs(whole.vectors - cached["vectors"]).max())
        if drift > 1e-3:
            raise ValueError(f"{key}: the whole windows made again differ from the cached ones by {drift:.2g}.")
        logger.info("%s: pooled pass %.1f s, whole pass again %.1f s (drift %.1g)", key, seconds, whole_seconds, drift)
        np.savez(path, vectors=pooled, seconds=seconds, whole_seconds=whole_seconds, drift=drift, threads=args.threads)
    with np.load(path) as saved:
        pooled_pass = {name_: saved[name_] for name_ in saved.files}
    entry["pooled_seconds"] = {
        "pooled": float(pooled_pass["seconds"]),
        "whole_again": float(pooled_pass["whole_seconds"]),
        "threads": int(pooled_pass["threads"]),
    }
    # the pooled vector as a window: a chunk that fits one window has it as its only window (kept once, as a span)
    passes["pooled"] = {
        "vectors": pooled_pass["vectors"],
        "owners": np.arange(len(chunks)),
        "spans": np.array([[0, len(t)] for t in texts]),
    }
    queries = reference.embed_queries([q.text for q in questions])
    unit_queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    qids = [q.qid for q in questions]
    # computed again, not read from the two-pass run: LlamaIndex's node ids are new on every split
    lexical = hybrid.lexical_run(chunks, questions, language)[0]
    for candidate in POOLED:
        vectors, owners = shape_windows(passes, tuple(candidate.split("+")))
        rankings = best_window_rankings(vectors, owners, unit_queries, [c.cid for c in chunks])
        fused = [
            fuse(d, x, hybrid.DEPTH, fusion=HYBRID[0], alpha=HYBRID[1]) for d, x in zip(rankings, lexical, strict=True)
        ]
        for run, ranks in ((candidate, rankings), (f"hybrid:{candidate}", fused)):
            result = hybrid.scored({q: [i for i, _ in r[: hybrid.K]] for q, r in zip(qids, ranks, strict=True)}, qrels)
            entry["runs"][run] = {**result, "vectors_per_chunk": len(owners) / len(chunks)}
            logger.info("%s %s: nDCG@10 %.4f", key, run, result["ndcg@10"])
    entry["pooled_done"] = True
    hybrid.save(results, args)


def window_lexical_run(
    chunks: list[Chunk], questions: list[Any], language: str | None, windows: dict[str, np.ndarray]
) -> list[list[tuple[str, float]]]:
    """BM25 over the chunks' windows (their texts, cut at the windows' spans), a chunk scored by its best window;
    top 20 chunks."""
    records = {
        row: Chunk(chunks[owner].cid, chunks[owner].document, chunks[owner].text[a:b], 0)
        for row, (owner, (a, b)) in enumerate(zip(windows["owners"].tolist(), windows["spans"].tolist(), strict=True))
    }
    index = LexicalIndex(LexicalSettings(language=language if language in LANGUAGES else None), lambda c: c.text)
    rankings = []
    for q in questions:
        best: dict[str, float] = {}
        for row, score in index.search(records, 0, q.text, len(records)):
            cid = records[row].cid
            best[cid] = max(best.get(cid, score), score)
        rankings.append(sorted(best.items(), key=lambda item: -item[1])[: hybrid.DEPTH])
    return rankings


# ---------------------------------------------------------------------------------------------------- report


def judged(sets: dict[str, Any], candidate: str, against: str) -> tuple[list[str], float, float]:
    """The rule's three conditions for `candidate` against the run `against` on every set: the failures, the mean
    nDCG@10 and the mean vectors a chunk."""
    failures, means, vectors = [], [], []
    for key, entry in sets.items():
        runs = entry["runs"]
        point = runs[candidate]["ndcg@10"] - runs[against]["ndcg@10"]
        low = paired_bootstrap(runs[against]["per_query"], runs[candidate]["per_query"], {})["ndcg_delta_ci"][0]
        on_interval = entry["questions"] >= MIN_QUESTIONS
        if point < -TOLERANCE or (on_interval and low <= LOWER_BOUND):
            failures.append(f"{key}: {point:+.3f} vs {against} (lower bound {low:+.3f})")
        if runs[candidate]["vectors_per_chunk"] > runs[RECIPE]["vectors_per_chunk"]:
            failures.append(
                f"{key}: {runs[candidate]['vectors_per_chunk']:.1f} vectors a chunk > the recipe's "
                f"{runs[RECIPE]['vectors_per_chunk']:.1f}"
            )
        means.append(runs[candidate]["ndcg@10"])
        vectors.append(runs[candidate]["vectors_per_chunk"])
    return failures, float(np.mean(means)), float(np.mean(vectors))


def default_mode_failures(sets: dict[str, Any], run: str) -> list[str]:
    """The hybrid study's rule for the default query mode, applied to `run`: level with the better of the dense
    default and BM25 on every set, and on the mean at least BM25 fused with each small-to-big recipe."""
    failures = []
    for key, entry in sets.items():
        runs = entry["runs"]
        better = TODAY if runs[TODAY]["ndcg@10"] >= runs["bm25"]["ndcg@10"] else "bm25"
        point = runs[run]["ndcg@10"] - runs[better]["ndcg@10"]
        low = paired_bootstrap(runs[better]["per_query"], runs[run]["per_query"], {})["ndcg_delta_ci"][0]
        if point < -TOLERANCE or (entry["questions"] >= MIN_QUESTIONS and low <= LOWER_BOUND):
            failures.append(f"{key}: {point:+.3f} vs {better} (lower bound {low:+.3f})")
    mean = float(np.mean([v["runs"][run]["ndcg@10"] for v in sets.values()]))
    for baseline in ("bm25+small-to-big", "bm25+multi-size"):
        value = float(np.mean([v["runs"][baseline]["ndcg@10"] for v in sets.values()]))
        if mean < value:
            failures.append(f"mean {mean:.4f} < {baseline} {value:.4f}")
    return failures


def pick(candidates: dict[str, dict[str, Any]], names: list[str]) -> str | None:
    """The highest mean among `names`; a tie within TIE goes to the fewer vectors a chunk."""
    if not names:
        return None
    top = max(candidates[n]["mean"] for n in names)
    tied = [n for n in names if candidates[n]["mean"] >= top - TIE]
    return min(tied, key=lambda n: candidates[n]["vectors"])


def verdicts(results: dict[str, Any]) -> dict[str, Any]:
    """The rule of docs/dense_window_study.md: against the recipe first, else against today's default."""
    sets = {k: v for k, v in results.items() if isinstance(v, dict) and v.get("done")}
    out: dict[str, Any] = {"sets": list(sets), "candidates": {}, "fallback": {}}
    for name in CANDIDATES:
        failures, mean, vectors = judged(sets, name, RECIPE)
        out["candidates"][name] = {"mean": mean, "vectors": vectors, "passes": not failures, "failures": failures}
    out["adopted"] = pick(out["candidates"], [n for n, v in out["candidates"].items() if v["passes"]])
    if out["adopted"] is None:
        today = out["candidates"][TODAY]["mean"]
        for name in CANDIDATES:
            if name == TODAY:
                continue
            failures, mean, vectors = judged(sets, name, TODAY)
            if mean < today + GAIN:
                failures.append(f"mean {mean:.4f} < today's {today:.4f} + {GAIN}")
            out["fallback"][name] = {"mean": mean, "vectors": vectors, "passes": not failures, "failures": failures}
        out["adopted"] = pick(out["fallback"], [n for n, v in out["fallback"].items() if v["passes"]]) or TODAY
    pooled = {k: v for k, v in sets.items() if v.get("pooled_done")}
    out["pooled"] = {}
    for key, entry in pooled.items():
        runs = entry["runs"]
        point = runs[POOLED[0]]["ndcg@10"] - runs[TODAY]["ndcg@10"]
        interval = paired_bootstrap(runs[TODAY]["per_query"], runs[POOLED[0]]["per_query"], {})["ndcg_delta_ci"]
        on_interval = entry["questions"] >= MIN_QUESTIONS
        judged_set = key.split(":")[-1].split("/")[0] in POOLED_SETS
        out["pooled"][key] = {
            "difference": point,
            "interval": interval,
            "judged": judged_set,
            "passes": not (point < -TOLERANCE or (on_interval and interval[0] <= LOWER_BOUND)),
            "seconds": entry.get("pooled_seconds"),
        }
    failing = [k for k, v in out["pooled"].items() if v["judged"] and not v["passes"]]
    out["pooled_missing"] = [
        k for k in sets if k.split(":")[-1].split("/")[0] in POOLED_SETS and not sets[k].get("pooled_done")
    ]
    out["pooled_adopted"] = bool(pooled) and not failing and not out["pooled_missing"]
    measured = {k: v for k, v in sets.items() if v.get("one_pass_done")}
    out["one_pass_sets"] = list(measured)
    out["one_pass"] = {}
    for name in ONE_PASS if measured else ():
        failures, mean, _ = judged(measured, f"one-pass:{name}", name)
        two = float(np.mean([v["runs"][name]["ndcg@10"] for v in measured.values()]))
        out["one_pass"][name] = {"mean": mean, "two_pass_mean": two, "passes": not failures, "failures": failures}
    out["lexical_windows"] = {}
    for size in LEXICAL_WINDOWS if measured else ():
        run, per_chunk = f"hybrid:{TODAY}:lexical-{size}-windows", f"hybrid:{TODAY}"
        failures = []
        for key, entry in measured.items():
            runs = entry["runs"]
            point = runs[run]["ndcg@10"] - runs[per_chunk]["ndcg@10"]
            low = paired_bootstrap(runs[per_chunk]["per_query"], runs[run]["per_query"], {})["ndcg_delta_ci"][0]
            if point < -TOLERANCE or (entry["questions"] >= MIN_QUESTIONS and low <= LOWER_BOUND):
                failures.append(f"{key}: {point:+.3f} (lower bound {low:+.3f})")
        mean = float(np.mean([v["runs"][run]["ndcg@10"] for v in measured.values()]))
        chunk_mean = float(np.mean([v["runs"][per_chunk]["ndcg@10"] for v in measured.values()]))
        if mean < chunk_mean + GAIN:
            failures.append(f"mean {mean:.4f} < per-chunk {chunk_mean:.4f} + {GAIN}")
        out["lexical_windows"][size] = {
            "default_mode": default_mode_failures(measured, run),
            "mean": mean,
            "chunk_mean": chunk_mean,
            "passes": not failures,
            "failures": failures,
        }
    return out


def markdown(results: dict[str, Any], report: dict[str, Any]) -> str:
    """One model's tables: nDCG@10 of every run per set, vectors a chunk, and the store check."""
    sets = report["sets"]
    one = [f"one-pass:{c}" for c in ONE_PASS]
    rows = ["bm25", "lexical", RECIPE, "dense", *BUDGET_CANDIDATES, *one, *POOLED, "bm25+multi-size"]
    rows += [f"hybrid:{c}" for c in (*BUDGET_CANDIDATES, *one, *POOLED)]
    rows = [r for r in rows if any(r in results[s]["runs"] for s in sets)]  # the runs this study made
    lines = hybrid.ndcg_table(results, sets, rows)
    lines += ["", "Vectors a chunk:", "", "| run | " + " | ".join(sets) + " |", "|---" * (len(sets) + 1) + "|"]
    for run in (RECIPE, *BUDGET_CANDIDATES):
        values = [results[s]["runs"].get(run, {}).get("vectors_per_chunk") for s in sets]
        if None in values:
            continue
        cells = [f"{v:.1f}" for v in values]
        lines.append(f"| {run} | " + " | ".join(cells) + " |")
    checks = [f"{s}: {results[s]['store_check']}" for s in sets if "store_check" in results[s]]
    lines += ["", "Store check (our default store's top 10 against whole+half's): " + ("; ".join(checks) or "none")]
    return "\n".join(lines) + "\n"


def why_not(failures: list[str], shown: int = 4) -> str:
    """A rule's failures for a table cell: the first few, and how many more."""
    more = f" (+{len(failures) - shown} more)" if len(failures) > shown else ""
    return "; ".join(failures[:shown]) + more


def rule_table(report: dict[str, Any]) -> str:
    lines = ["| candidate | mean nDCG@10 | vectors a chunk | passes | why not |", "|---|---|---|---|---|"]
    for name, v in report["candidates"].items():
        why = why_not(v["failures"])
        lines.append(f"| {name} | {v['mean']:.4f} | {v['vectors']:.1f} | {'yes' if v['passes'] else 'no'} | {why} |")
    if report["fallback"]:
        lines += ["", "None passes against the recipe; against today's default (whole+half):", ""]
        lines += ["| candidate | mean nDCG@10 | passes | why not |", "|---|---|---|---|"]
        for name, v in report["fallback"].items():
            why = why_not(v["failures"])
            lines.append(f"| {name} | {v['mean']:.4f} | {'yes' if v['passes'] else 'no'} | {why} |")
    lines += ["", f"Adopted: {report['adopted']}", ""]
    if report.get("one_pass"):
        lines += [f"One pass, on {len(report['one_pass_sets'])} sets:", ""]
        lines += ["| shape | one pass | two passes | passes | why not |", "|---|---|---|---|---|"]
        for name, v in report["one_pass"].items():
            why = why_not(v["failures"])
            lines.append(
                f"| {name} | {v['mean']:.4f} | {v['two_pass_mean']:.4f} | {'yes' if v['passes'] else 'no'} | {why} |"
            )
        lines.append("")
    if report.get("pooled"):
        lines += ["pooled+half − whole+half (nDCG@10, 95 % interval; seconds of the pooled pass / a whole pass):", ""]
        lines += ["| set | difference | interval | judged | passes | seconds |", "|---|---|---|---|---|---|"]
        for key, v in report["pooled"].items():
            low, high = v["interval"]
            seconds = v["seconds"] or {}
            timed = f"{seconds.get('pooled', 0):.1f} / {seconds.get('whole_again', 0):.1f}"
            lines.append(
                f"| {key} | {v['difference']:+.4f} | [{low:+.4f}, {high:+.4f}] | {'yes' if v['judged'] else 'no'} | "
                f"{'yes' if v['passes'] else 'no'} | {timed} |"
            )
        missing = f" (not measured: {', '.join(report['pooled_missing'])})" if report["pooled_missing"] else ""
        lines += ["", f"pooled+half adopted: {'yes' if report['pooled_adopted'] else 'no'}{missing}", ""]
    if report.get("lexical_windows"):
        lines += ["Per-window lexical side (hybrid with today's dense default):", ""]
        lines += ["| lexical side | hybrid mean | per-chunk hybrid mean | passes | why not |", "|---|---|---|---|---|"]
        for name, v in report["lexical_windows"].items():
            why = why_not(v["failures"])
            lines.append(
                f"| {name} | {v['mean']:.4f} | {v['chunk_mean']:.4f} | {'yes' if v['passes'] else 'no'} | {why} |"
            )
        lines += ["", "Its hybrid as the default query mode (the hybrid study's rule):", ""]
        for name, v in report["lexical_windows"].items():
            mode = v["default_mode"]
            lines.append(f"- {name} windows: {'passes' if not mode else 'no: ' + '; '.join(mode[:6])}")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- budget round


def memory_line(scale_reports: list[dict[str, Any]]) -> dict[str, float]:
    """The budget round's memory model from two store_scale.py reports of different window shapes: the compressed
    index's memory a chunk = a + b × windows a chunk (the line through the two runs), and the pooled store's memory
    a chunk (the mean of the two runs')."""
    if len(scale_reports) != 2:
        raise SystemExit(f"--scale needs two store_scale.py reports (two window shapes), got {len(scale_reports)}")
    points = [
        (
            r["configs"]["windows-compressed"]["vectors_per_chunk"],
            r["configs"]["windows-compressed"]["memory_bytes_per_chunk"],
        )
        for r in scale_reports
    ]
    (w1, m1), (w2, m2) = points
    if abs(w2 - w1) < 0.5:
        raise SystemExit(f"--scale: the two reports keep {w1:.1f} and {w2:.1f} windows a chunk; run two shapes")
    slope = (m2 - m1) / (w2 - w1)
    pooled = float(np.mean([r["configs"]["pooled"]["memory_bytes_per_chunk"] for r in scale_reports]))
    return {"a": m1 - slope * w1, "b": slope, "pooled": pooled, "points": points}


def build_ratios(build_reports: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """model -> stack -> shape name -> median build time as a ratio to the pooled store's, from store_build_speed.py
    --shapes reports (a shape name maps to the store its sizes were built as)."""
    ratios: dict[str, dict[str, dict[str, float]]] = {}
    for report in build_reports:
        for stack, run in report["runs"].items():
            stores = run["stores"]
            row = {name: stores[store]["vs_pooled"] for name, store in report["shapes"].items()}
            ratios.setdefault(report["model"], {})[stack] = row
    return ratios


def budget_verdicts(
    models: dict[str, dict[str, Any]], memory: dict[str, float], builds: dict[str, dict[str, dict[str, float]]]
) -> dict[str, Any]:
    """The budget round's rule (docs/dense_window_study.md, "Under today's budget"): every candidate's memory a
    chunk on every run, its build ratio on every (model, stack), its pooled difference to today's default (and, for
    the report, to the recipe), and its worst run; the adopted shape, or None (today's stays)."""
    runs = {f"{model}:{key}": entry for model, sets in models.items() for key, entry in sets.items()}
    keys = list(runs)
    out: dict[str, Any] = {"runs": keys, "memory": memory, "candidates": {}}
    for name in BUDGET_CANDIDATES:
        failures: list[str] = []
        missing = [k for k in keys if name not in runs[k]["runs"]]
        if missing:
            out["candidates"][name] = {"passes": False, "failures": [f"not run on {', '.join(missing)}"]}
            continue
        chunk_bytes = {k: memory["a"] + memory["b"] * runs[k]["runs"][name]["vectors_per_chunk"] for k in keys}
        over = {k: v for k, v in chunk_bytes.items() if v > memory["pooled"]}
        if over:
            worst = max(over, key=over.__getitem__)
            failures.append(f"memory on {len(over)} runs (worst {worst}: {over[worst]:.0f} B a chunk)")
        build = {f"{model}/{stack}": row.get(name) for model, stacks in builds.items() for stack, row in stacks.items()}
        unbuilt = [k for k, v in build.items() if v is None]
        slow = {k: v for k, v in build.items() if v is not None and v > BUILD_FACTOR}
        if unbuilt or len(build) < 2 * len(models):
            failures.append(f"build not measured on {', '.join(unbuilt) or 'every model and stack'}")
        if slow:
            failures.append("build " + ", ".join(f"{k} {v:.2f}×" for k, v in slow.items()))
        pooled = hybrid.pooled_interval(runs, keys, name, TODAY)
        recipe = hybrid.pooled_interval(runs, keys, name, RECIPE)
        if name != TODAY and pooled[1] <= 0:
            failures.append(f"pooled {pooled[0]:+.4f} (lower bound {pooled[1]:+.4f})")
        uppers = {
            k: paired_bootstrap(runs[k]["runs"][TODAY]["per_query"], runs[k]["runs"][name]["per_query"], {})[
                "ndcg_delta_ci"
            ]
            for k in keys
        }
        worse = [k for k, (_, high) in uppers.items() if high < CLEARLY_WORSE]
        if worse:
            failures.append(f"clearly worse on {', '.join(worse)}")
        worst_run = min(keys, key=lambda k: runs[k]["runs"][name]["ndcg@10"] - runs[k]["runs"][TODAY]["ndcg@10"])
        out["candidates"][name] = {
            "pooled_vs_today": list(pooled),
            "pooled_vs_recipe": list(recipe),
            "worst_run": worst_run,
            "worst_difference": runs[worst_run]["runs"][name]["ndcg@10"] - runs[worst_run]["runs"][TODAY]["ndcg@10"],
            "worst_interval": list(uppers[worst_run]),
            "windows_per_chunk": float(np.mean([runs[k]["runs"][name]["vectors_per_chunk"] for k in keys])),
            "max_bytes_per_chunk": max(chunk_bytes.values()),
            "memory_misses": sorted(over),
            "build": build,
            "passes": name != TODAY and not failures,
            "failures": failures,
        }
    passing = [n for n, v in out["candidates"].items() if v["passes"]]
    out["adopted"] = None
    if passing:
        top = max(out["candidates"][n]["pooled_vs_today"][0] for n in passing)
        tied = [n for n in passing if out["candidates"][n]["pooled_vs_today"][0] >= top - TIE]
        out["adopted"] = min(tied, key=lambda n: out["candidates"][n]["windows_per_chunk"])
    return out


def budget_table(report: dict[str, Any]) -> str:
    """The budget round's outcome as a table, with the memory model it used."""
    memory = report["memory"]
    allowed = (memory["pooled"] - memory["a"]) / memory["b"]
    lines = [
        f"Memory a chunk of the compressed default = {memory['a']:.0f} B + {memory['b']:.1f} B × windows a chunk; "
        f"the pooled store's: {memory['pooled']:.0f} B (so at most {allowed:.1f} windows a chunk). "
        f"Runs: {len(report['runs'])}.",
        "",
        "| candidate | windows a chunk (mean) | most B a chunk | − today's (pooled, 95 % CI) "
        "| − recipe (pooled, 95 % CI) | worst run (Δ, 95 % CI) | build vs pooled (worst) | passes | why not |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, v in report["candidates"].items():
        if "pooled_vs_today" not in v:
            lines.append(f"| {name} | – | – | – | – | – | – | no | {why_not(v['failures'])} |")
            continue
        d, lo, hi = v["pooled_vs_today"]
        rd, rlo, rhi = v["pooled_vs_recipe"]
        wlo, whi = v["worst_interval"]
        built = [b for b in v["build"].values() if b is not None]
        worst_build = f"{max(built):.2f}×" if built else "–"
        lines.append(
            f"| {name} | {v['windows_per_chunk']:.1f} | {v['max_bytes_per_chunk']:.0f} "
            f"| {d:+.4f} [{lo:+.4f}, {hi:+.4f}] | {rd:+.4f} [{rlo:+.4f}, {rhi:+.4f}] "
            f"| {v['worst_run']} {v['worst_difference']:+.3f} [{wlo:+.3f}, {whi:+.3f}] | {worst_build} "
            f"| {'yes' if v['passes'] else 'no'} | {why_not(v['failures'], 3)} |"
        )
    adopted = report["adopted"] or "none (today's default stays)"
    lines += ["", f"Adopted: {adopted}", ""]
    return "\n".join(lines)


def write_report(folders: list[Path], scale: str | None = None, build: str | None = None) -> int:
    """Each folder's tables and, over all folders' sets together, the rule's outcome (dense-windows-report.md in
    the first folder's parent)."""
    merged: dict[str, Any] = {}
    texts = []
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())
        report = verdicts(results)
        texts.append(markdown(results, report) + "\n" + rule_table(report))
        merged.update({f"{folder.name}:{k}": v for k, v in results.items() if k != "meta"})
    report = verdicts(merged)
    texts.append("All models: the rule on every set of every model\n\n" + rule_table(report))
    if scale or build:
        if not (scale and build):
            raise SystemExit("The budget round's report needs both --scale and --build.")
        models = {}
        for folder in folders:
            results = json.loads((folder / "results.json").read_text())
            models[results["meta"]["model"]] = {
                k: v for k, v in results.items() if isinstance(v, dict) and v.get("done")
            }
        memory = memory_line([json.loads(Path(f).read_text()) for f in scale.split(",")])
        builds = build_ratios([json.loads(Path(f).read_text()) for f in build.split(",")])
        budget = budget_verdicts(models, memory, builds)
        (folders[0].parent / "dense-windows-budget.json").write_text(json.dumps(budget, indent=1))
        texts.append("The budget round: every run of every model\n\n" + budget_table(budget))
    (folders[0].parent / "dense-windows-report.json").write_text(json.dumps(report, indent=1))
    (folders[0].parent / "dense-windows-report.md").write_text("\n\n".join(texts))
    sys.stdout.write("\n\n".join(texts))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.report:
        return write_report([Path(folder) for folder in args.out.split(",")], args.scale, args.build)
    results, reference = hybrid.prepared(args)
    extra = ("small-to-big", *(f"lexical:{size}-windows" for size in LEXICAL_WINDOWS))
    for name, stack in hybrid.study_runs(args):
        entry = results.get(f"{name}/{stack}", {})
        if args.pooled:
            if entry.get("done") and not entry.get("pooled_done"):
                pooled_set(name, stack, args.model, reference, args, results)
        elif args.one_pass:
            if entry.get("done") and not (entry.get("one_pass_done") and all(r in entry["runs"] for r in extra)):
                one_pass_set(name, stack, args.model, reference, args, results)
        elif not entry.get("done"):
            run_set(name, stack, args.model, reference, args, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
