"""`fair-retrieval search`: embed a query plainly with the folder's model and print the top-k documents.

The folder is a store folder (`fair_retrieval.stores.store_folder`: what `index` writes, or a LangChain
`FaissVectorStore.save_local` folder), searched by the store itself (`DocumentStore.text_search`, in every mode) with
the embedder its file records (rebuilt from its identity, `fair_retrieval.embedding.identity.identity_settings`; its
lexical side reads texts in the language it was built with), or an index folder of earlier releases, read as below.

For an index folder the embedder is rebuilt from the index manifest (model, pooling, max length, long-document
policy; see `index_folder.query_embedder_options`). `--model`, `--pooling` and `--max-length` replace the recorded
values (the manifest's, or a store's identity) only when they make the same embedder: one that differs (compared
with `fair_retrieval.embedding.identity`, as the vector stores compare theirs) is an error listing what differs,
unless `--allow-embedder-mismatch` is given (then a warning).

In an index of chunks (`index --chunk-tokens`) each hit is a chunk: the text
output shows its character offsets in the source document as `[start:end]`, and the JSON results carry them in
the metadata (`source_id`, `chunk`, `start_char`, `end_char`).

In a multi-vector store or index (a store folder's default; `index --output-format index --multivector`) the k hits
are k distinct documents ranked by their windows, and each shows its best window: its character span in the document
as `best window [start:end]` and a snippet of that window rather than of the document's start; the JSON results
carry it as `best_window` (start, end, window).

`--mode` chooses how: "hybrid" (the vectors and BM25 over the documents' text fused by `--fusion`, the dense side
weighted `--alpha`), "dense" (the vectors only) or "sparse" (BM25 only, in `--language`; the model is not loaded), as
the vector stores' retrieval modes do (`fair_retrieval.stores.SearchSettings`). Without `--mode` (or `--fusion`,
`--alpha`) a store folder or collection answers with the settings it records, else hybrid (`DEFAULT_SEARCH_MODE`).
The lexical index of an index folder is built from documents.jsonl when the command starts (the folder keeps no
second copy of the texts).

Several queries are answered with one load of the model and the index: `--query` repeated, or `--queries FILE` (one
query per line, blank lines skipped; `-` reads standard input and answers each line as it arrives, so a terminal or
a pipe can ask one question after another). Every query of a file is checked before the model loads. With several
queries, the text output heads each block with the query. `--json` prints JSON Lines, one object per query per line,
for one query as for several (`jq` reads either).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, get_args

from fair_retrieval.cli.common import gpu_choice, model_reference, require_faiss
from fair_retrieval.cli.index_folder import (
    DOCUMENTS_FILE,
    manifest_identity,
    open_published,
    query_embedder_options,
    read_manifest,
    read_rows,
    read_texts,
)
from fair_retrieval.embedding.embedder_building import build_embedder
from fair_retrieval.embedding.embedder_options import EmbedderOptions
from fair_retrieval.embedding.identity import check_identity, identity_settings
from fair_retrieval.engine.hook import Pooling
from fair_retrieval.inputs import check_query
from fair_retrieval.lexical import FUSIONS, LexicalIndex, LexicalSettings
from fair_retrieval.stores import DEFAULT_SEARCH_MODE, SEARCH_MODES, SearchSettings
from fair_retrieval.stores.best_window import BEST_WINDOW_KEY, window_hits
from fair_retrieval.stores.qdrant_store import QdrantStore, client_at
from fair_retrieval.stores.store_folder import is_store_folder, load_store_folder
from fair_retrieval.text_checks import MAX_TEXT_BYTES

SNIPPET_CHARS = 100
STDIN = "-"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `search` subcommand."""
    parser = subparsers.add_parser(
        "search",
        help="query a store folder built by `index` (or an index folder of earlier releases)",
        description="Embed a query (plainly, with the model recorded in the index manifest) and print the k best "
        "documents (or chunks, with their character offsets) with their scores and a one-line snippet.",
    )
    parser.add_argument(
        "folder",
        nargs="?",
        type=Path,
        help="the folder to search: a store folder (written by `fair-retrieval index`, or a LangChain "
        "FaissVectorStore's save_local folder) or an index folder of earlier releases",
    )
    parser.add_argument("--index", type=Path, help="the folder to search, as FOLDER (the earlier spelling)")
    parser.add_argument(
        "--qdrant",
        metavar="URL_OR_PATH",
        help="search a Qdrant collection instead of a folder (written by `index --qdrant`, or either stack's "
        "FairQdrantVectorStore): a server's URL (http://localhost:6333; QDRANT_API_KEY read from the environment) "
        "or a local-mode folder; with --collection",
    )
    parser.add_argument("--collection", help="the Qdrant collection to search (with --qdrant)")
    queries = parser.add_mutually_exclusive_group(required=True)
    queries.add_argument(
        "--query", action="append", help="the query text; repeat it to ask several with one load of the model"
    )
    queries.add_argument(
        "--queries",
        metavar="FILE",
        help="a UTF-8 file of queries, one per line (blank lines skipped); '-' reads them from standard input, "
        "answering each line as it arrives",
    )
    parser.add_argument("-k", "--top-k", type=int, default=5, help="number of results (default: 5)")
    parser.add_argument(
        "--json", action="store_true", help="print the results as JSON Lines: one object per query per line"
    )
    parser.add_argument(
        "--model",
        help="use this model instead of the manifest's: the same one under another name (a local copy) needs "
        "--allow-embedder-mismatch",
    )
    parser.add_argument("--pooling", choices=get_args(Pooling), help="override the manifest's pooling")
    parser.add_argument("--max-length", type=int, help="override the manifest's token limit per text")
    parser.add_argument(
        "--allow-embedder-mismatch",
        action="store_true",
        help="search even when --model/--pooling/--max-length differ from the embedder that built the index",
    )
    parser.add_argument(
        "--mode",
        choices=SEARCH_MODES,
        help=f"hybrid: the vectors and BM25 fused; dense: the vectors; sparse: BM25 over the texts (no model) "
        f"(default: the store's recorded mode, else {DEFAULT_SEARCH_MODE})",
    )
    parser.add_argument(
        "--language",
        default=LexicalSettings().language,
        help="the stemmer of the lexical side (sparse, hybrid): one of PyStemmer's languages, or 'none' for words "
        f"as they are (default: {LexicalSettings().language})",
    )
    parser.add_argument(
        "--fusion",
        choices=FUSIONS,
        help=f"how hybrid fuses (default: the store's recorded fusion, else {SearchSettings().fusion})",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        help="the dense side's weight in hybrid, 0 to 1 "
        f"(default: the store's recorded α, else {SearchSettings().alpha})",
    )
    parser.add_argument("--device", help="cpu, cuda, mps (default: best available)")
    parser.add_argument("--gpu", choices=["auto", "on", "off"], default="auto", help="FAISS on GPU (default: auto)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the index and model once (the lexical index too in a sparse or hybrid mode), then search and print for
    each query."""
    from fair_retrieval import FaissIndex, MultiVectorIndex

    require_faiss()
    if args.top_k < 1:
        raise ValueError(f"-k must be at least 1, got {args.top_k}.")
    asked = {"mode": args.mode, "fusion": args.fusion, "alpha": args.alpha}  # None: the store's own
    settings = SearchSettings().with_overrides(**asked)  # checked now, before anything loads
    lexical = LexicalSettings(language=None if args.language == "none" else args.language)
    if args.qdrant is not None or args.collection is not None:
        store = _collection_store(args)
        try:
            settings = store.call_settings(**asked)  # the collection's recorded settings, with what was asked
            return _search_store(args, store, settings, query_source(args), f"Qdrant collection {args.collection!r}")
        finally:
            store.collection.client.close()  # a local-mode folder is free for the next process
    folder = _folder(args)
    queries = query_source(args)
    if is_store_folder(folder):
        store = load_store_folder(folder, gpu=gpu_choice(args.gpu))
        return _search_store(args, store, store.call_settings(**asked), queries, folder)
    manifest = read_manifest(folder)
    multivector = manifest.get("multivector") is not None
    loader = MultiVectorIndex.load if multivector else FaissIndex.load
    index = loader(folder, gpu=gpu_choice(args.gpu))
    top_k = max(1, min(args.top_k, len(index)))  # k clamped to what the index holds
    embedder = None
    if settings.mode != "sparse":
        model, options = requested_embedder(args, manifest, folder)
        embedder = build_embedder(options, model)
        if embedder.dimension != index.dim:
            raise ValueError(
                f"{model} makes {embedder.dimension}-d vectors but the index holds {index.dim}-d vectors "
                f"(built with {manifest['model']}); search with that model."
            )
    several = args.queries is not None or len(args.query) > 1
    chunks = manifest.get("chunking") is not None
    documents = folder / DOCUMENTS_FILE  # read_manifest checked its name
    with open_published(documents) as rows:  # opened and checked once, for every query
        words = None if settings.mode == "dense" else LexicalIndex(lexical, str)
        texts = {} if words is None else read_texts(documents, rows)
        for query in queries:
            if words is None:
                results = search_one(index, embedder, query, top_k, documents, rows)
            else:
                results = text_search_one(index, embedder, words, texts, settings, query, top_k, documents, rows)
            if args.json:
                answer = finite_json({"query": query, "results": results})
                print(json.dumps(answer, ensure_ascii=False), flush=True)
            else:
                print_results(query if several else None, results, chunks, len(index) > 0)
    return 0


def _folder(args: argparse.Namespace) -> Path:
    """The folder to search: FOLDER or --index, exactly one."""
    if (args.folder is None) == (args.index is None):
        raise ValueError(
            "Give the folder to search once: fair-retrieval search FOLDER --query TEXT (or --index FOLDER)."
        )
    return Path(args.folder if args.folder is not None else args.index)


def _collection_store(args: argparse.Namespace) -> Any:
    """The store of a Qdrant collection (`--qdrant`, `--collection`), opened without embeddings: its record says
    which."""
    if args.qdrant is None or args.collection is None:
        raise ValueError("Search a Qdrant collection with both --qdrant URL_OR_PATH and --collection NAME.")
    if args.folder is not None or args.index is not None:
        raise ValueError("Give either a folder to search or --qdrant with --collection, not both.")
    client = client_at(args.qdrant, os.environ.get("QDRANT_API_KEY"))
    try:
        if not client.collection_exists(args.collection):
            raise ValueError(f"{args.qdrant} holds no collection {args.collection!r}; build one with `index --qdrant`.")
        return QdrantStore.of_texts(client=client, collection_name=args.collection, name="fair-retrieval search")
    except BaseException:
        client.close()
        raise


def _search_store(
    args: argparse.Namespace, store: Any, settings: SearchSettings, queries: Iterable[str], folder: Any
) -> int:
    """Search a store (a store folder's, loaded once through the stores' core, or a Qdrant collection's), with the
    embedder it records (rebuilt from its identity; none for sparse), each query answered in `settings`' mode."""
    if settings.mode != "sparse":
        recorded = store.recorded_identity
        if recorded is None:
            raise ValueError(f"{folder} records no embedder; search it with --mode sparse, or rebuild it.")
        model, options, prompts = identity_settings(recorded)
        model, options = _overridden(args, recorded, model, options, folder)
        store.embedder = build_embedder(options, model, prompts=prompts or None)  # queries only: nothing is saved
    top_k = max(1, min(args.top_k, len(store)))
    several = args.queries is not None or len(args.query) > 1
    for query in queries:
        hits = store.text_search(query, top_k, _query_vector(store.embedder), settings=settings) if len(store) else []
        results: list[dict[str, Any]] = [
            {"rank": rank, "score": hit.score, "id": hit.record.key, "text": hit.record.text}
            | {"metadata": hit.record.metadata}
            | ({BEST_WINDOW_KEY: dict(hit.best_window)} if hit.best_window is not None else {})
            for rank, hit in enumerate(hits, start=1)
        ]
        if args.json:
            answer = finite_json({"query": query, "results": results})
            print(json.dumps(answer, ensure_ascii=False), flush=True)
        else:
            chunks = any("start_char" in result["metadata"] for result in results)
            print_results(query if several else None, results, chunks, len(store) > 0)
    return 0


def _query_vector(embedder: Any) -> Any:
    """What embeds a query for a store search: the embedder's `embed_query`; none is needed in the sparse mode."""
    if embedder is not None:
        return embedder.embed_query
    return lambda _: None  # never called: a sparse search embeds nothing


def _overridden(
    args: argparse.Namespace, recorded: dict[str, Any], model: str, options: EmbedderOptions, folder: Path
) -> tuple[str, EmbedderOptions]:
    """The recorded model and options with --model/--pooling/--max-length, checked as for an index folder (an
    embedder other than the recorded one is an error listing the fields, unless --allow-embedder-mismatch)."""
    if args.model is None and args.pooling is None and args.max_length is None:
        return model, options
    requested = dict(recorded)
    if args.pooling is not None:
        requested["pooling"] = args.pooling
    if args.max_length is not None:
        requested["max_length"] = args.max_length
    if args.model:
        from fair_retrieval.embedding.loading import canonical_model_name, looks_like_path, resolve_model

        if looks_like_path(args.model) and not Path(args.model).expanduser().exists():
            resolve_model(args.model)  # "folder not found", not an embedder mismatch
        requested["model"] = canonical_model_name(model_reference(args.model))
    check_identity(
        recorded,
        requested,
        source=f"The store in {folder}",
        allow_mismatch=args.allow_embedder_mismatch,
        override="--allow-embedder-mismatch",
        remedy="Search without --model/--pooling/--max-length to use its own, or rebuild it with `fair-retrieval "
        "index` and these.",
    )
    options = dataclasses.replace(options, pooling=requested["pooling"], max_length=requested["max_length"])
    if args.max_length is not None:  # the recorded windows may not fit the new length; queries are never windowed
        options = dataclasses.replace(options, window_overlap=None, window_tokens=None)
    return str(args.model or model), options


def dense_hits(index: Any, embedder: Any, query: str, top_k: int) -> list[tuple[int, float, dict[str, int] | None]]:
    """The `top_k` (vector id, score, best window or None) of the dense search for `query`."""
    from fair_retrieval import MultiVectorIndex

    query_vector = embedder.embed_queries([query])
    if isinstance(index, MultiVectorIndex):
        found = index.search_documents(query_vector[0], top_k)
        return window_hits(found)
    scores, ids = index.search(query_vector, top_k)
    return [(int(i), float(s), None) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]


def search_one(
    index: Any, embedder: Any, query: str, top_k: int, documents: Path, handle: IO[bytes]
) -> list[dict[str, Any]]:
    """The `top_k` results for `query`: rank, score, id, text and metadata of each document (from `documents`,
    open as `handle`), and its best window in a multi-vector index."""
    return results_of(dense_hits(index, embedder, query, top_k), documents, handle)


def text_search_one(
    index: Any,
    embedder: Any,
    words: LexicalIndex,
    texts: dict[int, str],
    settings: SearchSettings,
    query: str,
    top_k: int,
    documents: Path,
    handle: IO[bytes],
) -> list[dict[str, Any]]:
    """The `top_k` results for `query` in a sparse mode (BM25 scores) or hybrid (fused scores in [0, 1], each side
    giving max(k, `settings.candidates`) candidates), as `search_one` gives them."""
    if settings.mode == "sparse":
        found = words.search(texts, 0, query, top_k)
        return results_of([(i, score, None) for i, score in found], documents, handle)
    pool = settings.pool(top_k)
    dense = dense_hits(index, embedder, query, min(pool, len(index)))
    lexical = words.search(texts, 0, query, pool)
    windows = {i: window for i, _, window in dense}
    fused = settings.fused(
        [(i, score) for i, score, _ in dense], lexical, top_k, dense_larger_is_better=index.metric != "l2"
    )
    return results_of([(i, score, windows.get(i)) for i, score in fused], documents, handle)


def results_of(
    hits: list[tuple[int, float, dict[str, int] | None]], documents: Path, handle: IO[bytes]
) -> list[dict[str, Any]]:
    """The printed results of (vector id, score, best window) hits, their rows read from `documents`."""
    rows = read_rows(documents, {i for i, _, _ in hits}, handle)
    return [
        {"rank": rank, "score": score, "id": rows[i]["id"], "text": rows[i]["text"], "metadata": rows[i]["metadata"]}
        | ({BEST_WINDOW_KEY: window} if window is not None else {})
        for rank, (i, score, window) in enumerate(hits, start=1)
    ]


def query_source(args: argparse.Namespace) -> Iterator[str] | list[str]:
    """The queries to answer, each checked as documents are (`check_query`): the `--query` values, or the lines
    of `--queries` (read and checked whole before the model loads; standard input line by line, as it comes).

    Raises:
        ValueError: an empty or undecodable query (naming it or its line), a file without queries, or a queries
            file that is not a regular file or is larger than a text may be.
    """
    if args.queries is None:
        for number, query in enumerate(args.query, start=1):
            if not query.strip():
                raise ValueError("--query is empty; give the text to search for.")
            check_query(query, "--query" if len(args.query) == 1 else f"--query number {number}")
        return list(args.query)
    if args.queries == STDIN:
        return _checked_lines(enumerate(sys.stdin.buffer, start=1), "standard input")
    path = Path(args.queries)
    if not path.is_file():
        raise ValueError(f"--queries {path}: not a file; give a text file with one query per line, or '-'.")
    if path.stat().st_size > MAX_TEXT_BYTES:
        raise ValueError(f"--queries {path}: larger than {MAX_TEXT_BYTES} bytes; split it into several files.")
    queries = list(_checked_lines(enumerate(path.read_bytes().splitlines(), start=1), str(path)))
    if not queries:
        raise ValueError(f"--queries {path}: no queries (every line is blank); write one query per line.")
    return queries


def _checked_lines(lines: Iterable[tuple[int, bytes]], source: str) -> Iterator[str]:
    """The non-blank lines of `source` decoded as UTF-8 (a byte-order mark dropped), without their line ends,
    each checked by `check_query`.

    Raises:
        ValueError: a line that is not UTF-8 or that `check_query` refuses, naming the line.
    """
    for number, raw in lines:
        try:
            query = raw.decode("utf-8").removeprefix("\ufeff").rstrip("\r\n")
        except UnicodeDecodeError as error:
            raise ValueError(f"{source} line {number}: not UTF-8 ({error.reason}); write queries in UTF-8.") from error
        if query.strip():
            yield check_query(query, f"{source} line {number}")


def print_results(query: str | None, results: list[dict[str, Any]], chunks: bool, filled: bool = True) -> None:
    """The results as text: one line per hit (rank, score, id, offsets or best window, snippet), headed by the
    query when several are answered; with no hit, why (an empty index, or no document sharing a word)."""
    if query is not None:
        print(f"Query: {snippet(query)}")
    for result in results:
        where = f"  {offsets(result['metadata'])}" if chunks else ""
        text = result["text"]
        best = result.get(BEST_WINDOW_KEY)
        if best is not None:
            where += f"  best window [{best['start']}:{best['end']}]"
            text = text[best["start"] : best["end"]]
        print(f"{result['rank']:>3}. {result['score']:.4f}  {result['id']}{where}  {snippet(text)}")
    if not results:
        print("No results: " + ("no document shares a word with the query." if filled else "the index is empty."))
    sys.stdout.flush()


def requested_embedder(args: argparse.Namespace, manifest: dict[str, Any], folder: Path) -> tuple[str, EmbedderOptions]:
    """The model and options to embed the query with: the manifest's, with --model/--pooling/--max-length.

    Raises:
        ValueError: if those make another embedder than the one that built the index (the message lists the
            differing fields), unless --allow-embedder-mismatch.
    """
    recorded = manifest_identity(manifest)
    overrides = {"pooling": args.pooling, "max_length": args.max_length}
    requested = dict(recorded, **{name: value for name, value in overrides.items() if value is not None})
    if args.model:
        from fair_retrieval.embedding.loading import looks_like_path, resolve_model  # imports torch: only when needed

        if looks_like_path(args.model) and not Path(args.model).expanduser().exists():
            resolve_model(args.model)  # "folder not found", not an embedder mismatch
        requested["model"] = model_reference(args.model)
    check_identity(
        recorded,
        requested,
        source=f"The index in {folder}",
        allow_mismatch=args.allow_embedder_mismatch,
        override="--allow-embedder-mismatch",
        remedy="Search without --model/--pooling/--max-length to use its own, or rebuild it with `fair-retrieval "
        "index` and these.",
    )
    options = query_embedder_options(manifest, device=args.device)
    options = dataclasses.replace(options, pooling=requested["pooling"], max_length=requested["max_length"])
    if args.max_length is not None:  # the manifest's windows may not fit the new one; queries are never windowed
        options = dataclasses.replace(options, window_overlap=None, window_tokens=None)
    return str(args.model or manifest["model"]), options


def finite_json(value: Any) -> Any:
    """`value` with NaN and infinite floats (which documents.jsonl may hold in metadata, read from JSONL input)
    replaced by None, so that --json prints valid JSON (JSON has no NaN or Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(item) for item in value]
    return value


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The text on one line (whitespace collapsed), cut to `limit` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def offsets(metadata: dict[str, Any]) -> str:
    """A chunk's place in its source document, `[start:end]` (so that `text[start:end]` is the chunk)."""
    return f"[{metadata.get('start_char', '?')}:{metadata.get('end_char', '?')}]"
