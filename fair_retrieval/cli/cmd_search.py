"""`fair-retrieval search`: embed a query plainly with the index's model and print the top-k documents.

The embedder is rebuilt from the index manifest (model, pooling, max length, long-document policy; see
`index_folder.query_embedder_options`). In an index of chunks (`index --chunk-tokens`) each hit is a chunk: the text
output shows its character offsets in the source document as `[start:end]`, and the JSON results carry them in
the metadata (`source_id`, `chunk`, `start_char`, `end_char`).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from fair_retrieval.cli.common import gpu_choice, require_faiss
from fair_retrieval.cli.index_folder import DOCUMENTS_FILE, query_embedder_options, read_manifest, read_rows

logger = logging.getLogger(__name__)

SNIPPET_CHARS = 100


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `search` subcommand."""
    parser = subparsers.add_parser(
        "search",
        help="query an index folder built by `index`",
        description="Embed a query (plainly, with the model recorded in the index manifest) and print the k best "
        "documents (or chunks, with their character offsets) with their scores and a one-line snippet.",
    )
    parser.add_argument("--index", required=True, type=Path, help="folder written by `fair-retrieval index`")
    parser.add_argument("--query", required=True, help="the query text")
    parser.add_argument("-k", "--top-k", type=int, default=5, help="number of results (default: 5)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--model", help="use this model instead of the manifest's (it must make the same vectors)")
    parser.add_argument("--device", help="cpu, cuda, mps (default: best available)")
    parser.add_argument("--gpu", choices=["auto", "on", "off"], default="auto", help="FAISS on GPU (default: auto)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the index and model, search, print."""
    from fair_retrieval import FaissIndex

    require_faiss()
    if not args.query.strip():
        raise ValueError("--query is empty; give the text to search for.")
    if args.top_k < 1:
        raise ValueError(f"-k must be at least 1, got {args.top_k}.")
    folder: Path = args.index
    manifest = read_manifest(folder)
    index = FaissIndex.load(folder, gpu=gpu_choice(args.gpu))
    model = args.model or manifest["model"]
    if args.model and args.model != manifest["model"]:
        logger.warning("Using --model %s instead of %s, which built the index.", args.model, manifest["model"])
    embedder = query_embedder_options(manifest, device=args.device).build(model)
    if embedder.dimension != index.dim:
        raise ValueError(
            f"{model} makes {embedder.dimension}-d vectors but the index holds {index.dim}-d vectors "
            f"(built with {manifest['model']}); search with that model."
        )
    query_vector = embedder.embed_queries([args.query])
    scores, ids = index.search(query_vector, args.top_k)
    hits = [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
    rows = read_rows(folder / manifest.get("documents", DOCUMENTS_FILE), {i for i, _ in hits})
    results = [
        {"rank": rank, "score": score, "id": rows[i]["id"], "text": rows[i]["text"], "metadata": rows[i]["metadata"]}
        for rank, (i, score) in enumerate(hits, start=1)
    ]
    if args.json:
        print(json.dumps({"query": args.query, "results": results}, ensure_ascii=False, indent=2))
    else:
        chunks = manifest.get("chunking") is not None
        for result in results:
            where = f"  {offsets(result['metadata'])}" if chunks else ""
            print(f"{result['rank']:>3}. {result['score']:.4f}  {result['id']}{where}  {snippet(result['text'])}")
        if not results:
            print("No results: the index is empty.")
    return 0


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The text on one line (whitespace collapsed), cut to `limit` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def offsets(metadata: dict[str, Any]) -> str:
    """A chunk's place in its source document, `[start:end]` (so that `text[start:end]` is the chunk)."""
    return f"[{metadata.get('start_char', '?')}:{metadata.get('end_char', '?')}]"
