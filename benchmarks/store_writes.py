"""What a small write costs as a store grows, and what the default (hybrid) query costs beside a dense one.

For each size, the default multi-vector store through LangChain (`FaissVectorStore.from_texts`, saved with
`save_local`), filled by a fake window embedder (no model time: `--windows` random unit vectors a chunk, 384-d) with
synthetic chunks of `--words` Zipf-distributed words, is measured on the code path users run:

- `write_s`: add one document, then `save_local` into the folder it came from; `write_bytes`: the bytes of the
  files that save created or replaced;
- `first_hybrid_after_write_s`: the first hybrid query after that write (the lexical side catches up);
- `load_s`: `load_local` of the folder, and `first_hybrid_after_load_s`;
- `dense_p50_ms` / `dense_p95_ms` and `hybrid_p50_ms` / `hybrid_p95_ms`: warm queries, one thread (the default query
  is hybrid, `retrieval_mode="dense"` the opt-out);
- `folder_bytes`: what the folder holds.

Beside it, in the same run and data, what a LlamaIndex user would assemble instead (`--anchor`): llama-index's
`FaissVectorStore` (a flat inner-product index, one pooled vector a chunk) persisted with its `StorageContext`, and
`BM25Retriever` (llama-index-retrievers-bm25), which is rebuilt from every node after a write, fused by relative
scores as `QueryFusionRetriever(mode="relative_score")` does. With `--baseline CHECKOUT`, the same measurement of our
store also runs on another checkout of this repository (e.g. a worktree of an earlier commit), in a subprocess
of the same run. Results: `OUT/results.json` and a table on stdout.

    python benchmarks/store_writes.py --sizes 2000,40000,200000 --baseline ../old-main --out runs/store-writes
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

DIM = 384


def chunks(count: int, words: int, seed: int) -> list[str]:
    """`count` texts of `words` words each, drawn from a Zipf law over a 30,000-word vocabulary."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.2, size=(count, words)), 30_000) - 1
    return [" ".join(f"w{rank}" for rank in row) for row in ranks]


def queries(count: int, seed: int) -> list[str]:
    """`count` queries of 3 to 8 words, from the same vocabulary (common words more often)."""
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(count):
        ranks = np.minimum(rng.zipf(1.3, size=int(rng.integers(3, 9))), 30_000) - 1
        found.append(" ".join(f"w{rank}" for rank in ranks))
    return found


def unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)).astype(np.float32)


class FakeWindows:
    """A LangChain `Embeddings` that gives windows: each text `windows` random unit vectors (seeded by the text),
    their mean its pooled vector; spans cut the text in equal parts."""

    def __init__(self, windows: int) -> None:
        self.windows = windows

    def _vectors(self, text: str) -> np.ndarray:
        rng = np.random.default_rng(zlib.crc32(text.encode()))
        return unit(rng.standard_normal((self.windows, DIM)))

    def embed_document_windows(self, texts: list[str]) -> Any:
        from fair_retrieval.embedding.windows import DocumentWindows

        vectors = np.concatenate([self._vectors(text) for text in texts])
        owners = np.repeat(np.arange(len(texts)), self.windows)
        spans = []
        for text in texts:
            step = max(1, len(text) // self.windows)
            spans.extend((part * step, min(len(text), (part + 1) * step)) for part in range(self.windows))
        pooled = unit(vectors.reshape(len(texts), self.windows, DIM).mean(axis=1))
        weights = np.ones(len(owners), dtype=np.int64)
        return DocumentWindows(pooled, vectors, owners, np.asarray(spans, dtype=np.int64), weights)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [unit(self._vectors(text).mean(axis=0)).tolist() for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vectors(text)[0].tolist()


def langchain_embeddings(windows: int) -> Any:
    from langchain_core.embeddings import Embeddings

    class Fake(FakeWindows, Embeddings):
        pass

    return Fake(windows)


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def files_now(folder: Path) -> dict[Path, tuple[int, int, int]]:
    """Every file of `folder`: path → (inode, modification time in ns, size)."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_file():
            status = path.stat()
            found[path] = (status.st_ino, status.st_mtime_ns, status.st_size)
    return found


def written_bytes(before: dict[Path, tuple[int, int, int]], folder: Path) -> int:
    """The bytes of the files of `folder` that are new or replaced since `before` (`files_now`)."""
    return sum(state[2] for path, state in files_now(folder).items() if before.get(path) != state)


def timed(call: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return statistics.median(ordered) * 1e3, ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1e3


def figures(
    build_s: float,
    write: tuple[float, int],
    first_after_write: float,
    load_s: float,
    first_after_load: float,
    dense: list[float],
    hybrid: list[float],
    folder: Path,
) -> dict[str, Any]:
    """One run's row of results (the queries' seconds as p50 / p95 milliseconds)."""
    dense_p50, dense_p95 = percentiles(dense)
    hybrid_p50, hybrid_p95 = percentiles(hybrid)
    return {
        "build_s": build_s,
        "write_s": write[0],
        "write_bytes": write[1],
        "first_hybrid_after_write_s": first_after_write,
        "load_s": load_s,
        "first_hybrid_after_load_s": first_after_load,
        "dense_p50_ms": dense_p50,
        "dense_p95_ms": dense_p95,
        "hybrid_p50_ms": hybrid_p50,
        "hybrid_p95_ms": hybrid_p95,
        "folder_bytes": folder_bytes(folder),
    }


def ours(size: int, args: argparse.Namespace, work: Path, asked: list[str]) -> dict[str, Any]:
    """The default store through LangChain, measured as the module docstring says."""
    from langchain_fair import FaissVectorStore

    embeddings = langchain_embeddings(args.windows)
    texts = chunks(size, args.words, seed=size)
    folder = work / f"ours-{size}"
    build_s, store = timed(
        lambda: FaissVectorStore.from_texts(texts, embeddings, ids=[f"c{i}" for i in range(size)], gpu=False)
    )
    store.save_local(folder)
    store.similarity_search(asked[0], k=10)  # the lexical side built once before the write, as in a live store
    dense = [timed(lambda q=q: store.similarity_search(q, k=10, retrieval_mode="dense"))[0] for q in asked]
    hybrid = [timed(lambda q=q: store.similarity_search(q, k=10))[0] for q in asked]

    def write() -> None:
        store.add_texts(chunks(1, args.words, seed=size + 1), ids=["new"])
        store.save_local(folder)

    before = files_now(folder)
    write_s, _ = timed(write)
    written = written_bytes(before, folder)
    first_after_write, _ = timed(lambda: store.similarity_search(asked[1], k=10))
    load_s, loaded = timed(lambda: FaissVectorStore.load_local(folder, embeddings, gpu=False))
    first_after_load, _ = timed(lambda: loaded.similarity_search(asked[2], k=10))
    return figures(build_s, (write_s, written), first_after_write, load_s, first_after_load, dense, hybrid, folder)


def anchor(size: int, args: argparse.Namespace, work: Path, asked: list[str]) -> dict[str, Any]:
    """llama-index's FaissVectorStore + BM25Retriever, as a LlamaIndex user assembles a hybrid search."""
    import faiss
    from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever
    from llama_index.vector_stores.faiss import FaissVectorStore

    fake = FakeWindows(args.windows)

    class Embed(BaseEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            return fake.embed_documents([text])[0]

        def _get_query_embedding(self, query: str) -> list[float]:
            return fake.embed_query(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return fake.embed_query(query)

    embed = Embed()
    texts = chunks(size, args.words, seed=size)
    folder = work / f"anchor-{size}"

    def build() -> Any:
        vectors = fake.embed_documents(texts)
        nodes = [
            TextNode(id_=f"c{i}", text=t, embedding=v) for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
        ]
        context = StorageContext.from_defaults(vector_store=FaissVectorStore(faiss_index=faiss.IndexFlatIP(DIM)))
        return VectorStoreIndex(nodes, storage_context=context, embed_model=embed)

    build_s, index = timed(build)
    index.storage_context.persist(persist_dir=str(folder))

    def hybrid_search(index: Any, bm25: Any, question: str) -> list[str]:
        dense = index.as_retriever(similarity_top_k=20).retrieve(question)
        sparse = bm25.retrieve(question)
        scores: dict[str, float] = {}
        for hits, weight in ((dense, 0.3), (sparse, 0.7)):
            values = [hit.score or 0.0 for hit in hits]
            low, high = (min(values), max(values)) if values else (0.0, 0.0)
            for hit, value in zip(hits, values, strict=True):
                scaled = (value - low) / (high - low) if high > low else 1.0
                scores[hit.node.node_id] = scores.get(hit.node.node_id, 0.0) + weight * scaled
        return sorted(scores, key=lambda key: -scores[key])[:10]

    def rebuilt_bm25(index: Any) -> Any:
        nodes = list(index.docstore.docs.values())
        return BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=20)

    bm25 = rebuilt_bm25(index)
    dense = [timed(lambda q=q: index.as_retriever(similarity_top_k=10).retrieve(q))[0] for q in asked]
    hybrid = [timed(lambda q=q: hybrid_search(index, bm25, q))[0] for q in asked]

    def write() -> None:
        text = chunks(1, args.words, seed=size + 1)[0]
        index.insert_nodes([TextNode(id_="new", text=text, embedding=fake.embed_documents([text])[0])])
        index.storage_context.persist(persist_dir=str(folder))

    before = files_now(folder)
    write_s, _ = timed(write)
    written = written_bytes(before, folder)
    first_after_write, _ = timed(lambda: hybrid_search(index, rebuilt_bm25(index), asked[1]))

    def load() -> Any:
        context = StorageContext.from_defaults(
            vector_store=FaissVectorStore.from_persist_dir(str(folder)), persist_dir=str(folder)
        )
        return load_index_from_storage(context, embed_model=embed)

    load_s, loaded = timed(load)
    first_after_load, _ = timed(lambda: hybrid_search(loaded, rebuilt_bm25(loaded), asked[2]))
    return figures(build_s, (write_s, written), first_after_write, load_s, first_after_load, dense, hybrid, folder)


def baseline(size: int, args: argparse.Namespace, work: Path, asked: list[str]) -> dict[str, Any]:
    """`ours`, run on the checkout `args.baseline` in a subprocess (its package and LangChain adapter first on the
    path), on the same data."""
    checkout = args.baseline.resolve()
    path = os.pathsep.join(
        [str(checkout), str(checkout / "integrations" / "langchain"), os.environ.get("PYTHONPATH", "")]
    )
    row_file = work / "baseline-row.json"
    command = [sys.executable, __file__, "--ours-only", str(row_file), "--sizes", str(size)]
    command += ["--windows", str(args.windows), "--words", str(args.words), "--queries", str(args.queries)]
    subprocess.run(command, check=True, cwd=checkout, env={**os.environ, "PYTHONPATH": path})
    return dict(json.loads(row_file.read_text()))


COLUMNS = (
    "write_s",
    "write_bytes",
    "first_hybrid_after_write_s",
    "load_s",
    "first_hybrid_after_load_s",
    "dense_p50_ms",
    "dense_p95_ms",
    "hybrid_p50_ms",
    "hybrid_p95_ms",
    "folder_bytes",
)


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| run | chunks | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for row in results:
        cells = [f"{row[c]:,}" if c.endswith("_bytes") else f"{row[c]:.3f}" for c in COLUMNS]
        lines.append(f"| {row['run']} | {row['chunks']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,40000,100000", help="comma-separated chunk counts")
    parser.add_argument("--windows", type=int, default=4, help="windows a chunk (the default store keeps 2-14)")
    parser.add_argument("--words", type=int, default=60, help="words a chunk")
    parser.add_argument("--queries", type=int, default=200, help="warm queries timed per run")
    parser.add_argument("--anchor", action=argparse.BooleanOptionalAction, default=True, help="run the anchor too")
    parser.add_argument("--baseline", type=Path, help="another checkout whose store is measured too (a subprocess)")
    parser.add_argument("--ours-only", type=Path, help=argparse.SUPPRESS)  # the baseline's subprocess: one row here
    parser.add_argument("--out", type=Path, default=Path("runs/store-writes"))
    args = parser.parse_args(argv)
    args.sizes = [int(size) for size in args.sizes.split(",")]
    if any(size < 10 for size in args.sizes) or args.windows < 1 or args.words < 1 or args.queries < 3:
        parser.error("sizes of at least 10 chunks, at least one window and word a chunk, and 3 queries")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    asked = queries(args.queries, seed=7)
    if args.ours_only is not None:  # one row of `ours`, for `baseline` in the parent process
        work = Path(tempfile.mkdtemp(prefix="store-writes-baseline-"))
        try:
            args.ours_only.write_text(json.dumps(ours(args.sizes[0], args, work, asked)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    if args.baseline is not None and not (args.baseline / "fair_retrieval").is_dir():
        raise SystemExit(f"--baseline {args.baseline} is not a checkout of this repository (no fair_retrieval/).")
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    work = Path(tempfile.mkdtemp(prefix="store-writes-"))
    try:
        for size in args.sizes:
            runs = [("ours (default store, LangChain)", ours)]
            if args.baseline is not None:
                runs.append((f"ours at {args.baseline.name} (baseline checkout)", baseline))
            if args.anchor:
                runs.append(("llama-index FaissVectorStore + BM25Retriever", anchor))
            for name, run in runs:
                row = {"run": name, "chunks": size, **run(size, args, work, asked)}
                results.append(row)
                print(json.dumps(row), flush=True)
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir()
                gc.collect()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (args.out / "results.json").write_text(
        json.dumps(
            {"args": vars(args) | {"out": str(args.out), "baseline": str(args.baseline)}, "results": results}, indent=1
        )
    )
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
