"""`fair-retrieval index`: documents → calibrated embeddings → a FAISS index folder that `search` can query.

Input is a folder of .txt/.md files (id = path relative to the folder) or a JSONL file (one JSON object per line with
a text field and optional id/metadata fields). The output folder holds:

- `index.faiss` + `index.json`: the FaissIndex; vector id i is row i of documents.jsonl.
- `documents.jsonl`: one `{"id", "text", "metadata"}` object per line.
- `manifest.json`: how the vectors were made (model, pooling, max_length, calibration), so queries are embedded
  by the same model; moved in last, so a folder with a manifest is complete (see `index_folder`).

With `--engine ray` the documents are embedded on Ray Data workers instead (see `fair_retrieval.distributed`); the
folder then also keeps the resumable embedding shards in `shards/`, and without `--kind` the index is an exact
flat one for small corpora and IVF-PQ (trained on a sample) for large ones.
"""

from __future__ import annotations

import argparse
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fair_retrieval.cli.common import dump_json, gpu_choice, model_reference, plural, require_faiss
from fair_retrieval.cli.index_folder import (
    DOCUMENTS_FILE,
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    MANIFEST_VERSION,
    publish,
    staging_folder,
    write_documents,
)
from fair_retrieval.cli.options import (
    add_calibration_arguments,
    add_document_arguments,
    add_model_arguments,
    calibration_from_args,
    embedder_options,
)
from fair_retrieval.cli.ray_engine import add_ray_arguments, index_on_ray
from fair_retrieval.inputs import read_documents

logger = logging.getLogger(__name__)

KINDS = ("flat", "hnsw", "ivf", "ivfpq")
_OWN_FILES = ("index.faiss", "index.json", DOCUMENTS_FILE, MANIFEST_FILE)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `index` subcommand."""
    parser = subparsers.add_parser(
        "index",
        help="embed documents (calibrated) into a FAISS index folder",
        description="Embed a folder of .txt/.md files or a JSONL file with calibration and write a FAISS index "
        "folder (index files, documents.jsonl, manifest.json) for `fair-retrieval search`.",
    )
    add_model_arguments(parser)
    parser.add_argument("--input", required=True, type=Path, help="a folder of .txt/.md files, or a JSONL file")
    parser.add_argument("--output", required=True, type=Path, help="folder to write the index into")
    parser.add_argument(
        "--kind",
        choices=KINDS,
        help="FAISS index kind (default: flat, exact; with --engine ray: flat or ivfpq by corpus size, see "
        "--flat-limit). ivfpq without --index-param nlist/m/nbits is sized to the corpus (IVF-PQ + SQ8 "
        "refinement, ≥ 0.95 recall@10 at about 30%% of the flat size)",
    )
    parser.add_argument(
        "--factory",
        help="instead of --kind, any faiss index-factory string, e.g. 'OPQ48,IVF4096,PQ48x8,Refine(SQ8)' "
        "(--engine local)",
    )
    parser.add_argument(
        "--search",
        help="search parameters for --factory by faiss ParameterSpace name, e.g. 'nprobe=64,k_factor_rf=16'",
    )
    parser.add_argument(
        "--index-param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="FaissIndex parameter, repeatable: nlist, nprobe (ivf/ivfpq), m, nbits, k_factor (ivfpq), "
        "M, ef_construction, ef_search (hnsw)",
    )
    parser.add_argument("--gpu", choices=["auto", "on", "off"], default="auto", help="FAISS on GPU (default: auto)")
    add_document_arguments(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace an index already in --output")
    add_calibration_arguments(parser)
    add_ray_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read, embed, index and write; prints a one-line summary.

    Everything is written to a staging folder first and moved into --output at the end (the manifest last), so
    an interrupted run leaves no half-written index.
    """
    from fair_retrieval import FaissIndex, __version__

    require_faiss()
    output: Path = args.output
    _check_output(output, args.overwrite)
    _check_not_inside(output, args.input)
    params: dict[str, Any] = parse_index_params(args.index_param)
    calibration = calibration_from_args(args)
    if args.factory and args.kind:
        raise ValueError("Pass either --kind or --factory, not both.")
    if not args.input.exists():
        raise FileNotFoundError(f"--input {args.input} does not exist.")
    with staging_folder(output) as staging:
        if args.engine == "ray":  # Ray workers read the input; ids 0..n-1 = rows of documents.jsonl, written by it
            index, count = index_on_ray(
                args,
                calibration,
                params,
                staging / DOCUMENTS_FILE,
                model=model_reference(args.model),
                gpu=gpu_choice(args.gpu),
            )
            pooling, max_length = args.pooling, args.max_length  # None means the model's own, as in search
        else:
            documents = read_documents(args.input, text_field=args.text_field, id_field=args.id_field)
            logger.info("Read %s from %s", plural(len(documents), "document"), args.input)
            embedder = embedder_options(args, calibration=calibration).build(args.model)
            vectors = embedder.embed_documents([doc.text for doc in documents], show_progress_bar=True)
            shape = {"factory": args.factory, "search": args.search} if args.factory else {"kind": args.kind or "flat"}
            index = FaissIndex(vectors.shape[1], metric="ip", gpu=gpu_choice(args.gpu), **shape, **params)
            index.add(vectors)  # ids 0..n-1: row numbers of documents.jsonl
            pooling, max_length = embedder.pooling, embedder.max_length
            write_documents(documents, staging / DOCUMENTS_FILE)
            count = len(documents)
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "model": model_reference(args.model),
            "pooling": pooling,
            "max_length": max_length,
            "calibration": calibration.to_dict() if calibration is not None else None,
            "dim": index.dim,
            "count": count,
            "kind": index.kind,
            "metric": "ip",
            "params": index.params,
            "documents": DOCUMENTS_FILE,
            "engine": args.engine,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "fair_retrieval_version": __version__,
        }
        index.save(staging)
        dump_json(manifest, staging / MANIFEST_FILE)
        publish(staging, output)
    state = "calibrated" if calibration is not None else "plain"
    print(f"Indexed {plural(count, 'document')} ({state}, {index.dim}-d, {index.kind}) into {output}")
    return 0


def parse_index_params(items: list[str]) -> dict[str, int]:
    """Parse repeated --index-param KEY=VALUE (integer values) into FaissIndex keyword arguments."""
    params: dict[str, int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--index-param {item!r}: use KEY=VALUE, e.g. --index-param nlist=256.")
        try:
            params[key.strip()] = int(value)
        except ValueError as error:
            raise ValueError(f"--index-param {item!r}: the value must be an integer.") from error
    return params


def _check_not_inside(output: Path, source: Path) -> None:
    """Refuse an --output folder inside the --input folder (the next run would index the index)."""
    if not source.is_dir():
        return
    resolved_output, resolved_source = output.expanduser().resolve(), source.expanduser().resolve()
    if resolved_output == resolved_source or resolved_source in resolved_output.parents:
        raise ValueError(
            f"--output {output} is inside --input {source}; write the index to a folder outside the documents."
        )


def _check_output(output: Path, overwrite: bool) -> None:
    if output.exists() and not output.is_dir():
        raise ValueError(f"--output {output} is a file; pass a folder.")
    if output.is_dir() and not overwrite:
        ours = [name for name in _OWN_FILES if (output / name).exists()]
        if ours:
            raise ValueError(
                f"--output {output} already holds an index ({', '.join(ours)}); pass --overwrite to replace it, "
                "or choose another folder."
            )
