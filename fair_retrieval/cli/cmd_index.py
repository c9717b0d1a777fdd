"""`fair-retrieval index`: documents → calibrated embeddings → a store folder that `search` (and both vector stores)
open.

Input is a folder of .txt/.md files (id = path relative to the folder) or a JSONL file (one JSON object per line with
a text field and optional id/metadata fields). With `--chunk-tokens N` every document is cut into chunks of at most
N model tokens first (`fair_retrieval.cli.chunking`), with ids `ID#k` and their source id and character offsets in
the metadata.

The output is a store folder (`fair_retrieval.stores.store_folder`: `store.json` beside `index/`), built through the
stores' core as the vector stores build a store by default: every document (or chunk) kept as the vectors of its
windows, cut at paragraph and sentence ends at the model's window and at half of it (`default_windows`), found by its
best window (aggregate max), its windows compressed (`MultiVectorIndex(dim, compressed=True)`: PQ codes in memory,
the exact vectors in a memory-mapped file; flat where the codes do not fit the vector size). It opens in
LangChain's `FaissVectorStore.load_local` and LlamaIndex's `FairFaissVectorStore.from_persist_dir`. The others on
request: `--pooled` (or `--multivector false`) keeps one pooled vector per document; `--window-tokens`,
`--window-boundaries` or `--window-overlap` keep the embedder's own windows
of those settings; `--aggregate`, `--kind`, `--index-param`, `--factory`.

`--output-format index` writes the command's earlier index folder instead (`fair_retrieval.cli.index_folder`):

- `index.faiss` + `index.json`: the FaissIndex; vector id i is row i of documents.jsonl.
- `documents.jsonl`: one `{"id", "text", "metadata"}` object per line (a document, or a chunk).
- `manifest.json`: how the vectors were made (model, pooling, max_length, long_documents, window_overlap,
  calibration, chunking, multivector), so queries are embedded by the same model; moved in last, so a folder with a
  manifest is complete (see `index_folder`).

There a document longer than the model's window is split into windows pooled into one vector (or truncated,
`--long-documents`), and with `--multivector` kept as the vectors of its token windows (`windows.json` beside the
index), ranked by `--aggregate`.

What the embedder did (documents windowed, truncated, calibrated) is printed from `FairEmbedder.last_report`.

With `--engine ray` the documents are embedded on Ray Data workers instead (see `fair_retrieval.distributed`), the
windows of a store folder in the store's shape; the folder then also keeps the resumable embedding shards in
`shards/` (for an index folder, without `--kind` the index is an exact flat one for small corpora and IVF-PQ, trained
on a sample, for large ones).
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fair_retrieval.cli.chunking import chunk_documents
from fair_retrieval.cli.common import gpu_choice, model_reference, plural, require_faiss
from fair_retrieval.cli.index_folder import (
    DOCUMENTS_FILE,
    INDEX_RECORD,
    REPLACED_FILES,
    STORE_FILES,
    index_manifest,
    publish,
    remove_index_folder_files,
    remove_store_folder_files,
    staging_folder,
    write_documents,
    write_manifest,
)
from fair_retrieval.cli.options import (
    add_calibration_arguments,
    add_command,
    add_document_arguments,
    add_input_argument,
    calibration_from_args,
    embedder_options,
    parse_bool,
)
from fair_retrieval.cli.ray_engine import add_ray_arguments, index_on_ray, store_on_ray
from fair_retrieval.embedding.embedder_building import build_embedder
from fair_retrieval.embedding.embedder_options import EmbedderOptions
from fair_retrieval.embedding.identity import identity_settings
from fair_retrieval.embedding.windows import chunk_plan
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.index import AGGREGATES, DEFAULT_AGGREGATE, KINDS
from fair_retrieval.inputs import Document, InputProblemsError, input_kind, no_documents_error, scan_documents
from fair_retrieval.jsonio import record_generation
from fair_retrieval.stores import StoreWindows
from fair_retrieval.stores.qdrant_store import QdrantStore, client_at
from fair_retrieval.stores.store_folder import (
    folder_generation,
    is_store_folder,
    load_store_folder,
    new_folder_store,
    save_store_folder,
)

if TYPE_CHECKING:
    from fair_retrieval.embedding.embedder import EmbeddingReport, FairEmbedder

logger = logging.getLogger(__name__)

OUTPUT_FORMATS = ("store", "index")
WINDOW_FLAGS = ("window_tokens", "window_boundaries", "window_overlap")
"""The embedder's window flags: given, a store keeps the embedder's windows they set instead of the study's."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `index` subcommand."""
    parser = add_command(
        subparsers,
        "index",
        help="embed documents (calibrated) into a store folder",
        description="Embed a folder of .txt/.md files or a JSONL file with calibration and write a store folder "
        "(store.json and index/) for `fair-retrieval search`, LangChain's FaissVectorStore.load_local and "
        "LlamaIndex's FairFaissVectorStore.from_persist_dir: the vector stores' default, each document (or chunk, "
        "with --chunk-tokens) kept as its windows at the model's window and half of it, found by its best window.",
    )
    add_input_argument(parser)
    parser.add_argument("--output", type=Path, help="folder to write the index into (or --qdrant)")
    parser.add_argument(
        "--qdrant",
        metavar="URL_OR_PATH",
        help="write the store into a Qdrant collection instead of --output: a server's URL (http://localhost:6333; "
        "QDRANT_API_KEY read from the environment) or a local-mode folder; with --collection. An --input that is a "
        "store folder is copied with its windows, no model run",
    )
    parser.add_argument(
        "--collection", help="the Qdrant collection (created if absent, else added to with the same embedder)"
    )
    parser.add_argument(
        "--kind",
        choices=KINDS,
        help="FAISS index kind (default: a store folder's, compressed windows for a multi-vector store, flat for "
        "--pooled; an index folder's: flat, exact; with --engine ray: flat or ivfpq by corpus size, see "
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
    group = parser.add_argument_group("chunks (--engine local; default: one vector per document)")
    group.add_argument(
        "--chunk-tokens",
        type=int,
        metavar="N",
        help="cut every document into chunks of at most N model tokens, cut between tokens at sentence or word "
        "ends where possible, and index each chunk: ids ID#k (k from 0), metadata source_id, chunk, start_char, "
        "end_char (plus the document's)",
    )
    group.add_argument(
        "--chunk-overlap",
        type=int,
        metavar="M",
        help="tokens consecutive chunks share, at least (default: an eighth of --chunk-tokens)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--multivector",
        nargs="?",
        const=True,
        default=None,
        type=parse_bool,
        metavar="true|false",
        help="keep every window's vector (each document, or chunk, as the vectors of its windows) and let "
        "`search` rank documents by their best window(s): the default of a store folder; --multivector false is "
        "--pooled",
    )
    mode.add_argument(
        "--pooled",
        dest="multivector",
        action="store_false",
        default=None,
        help="one pooled vector per document (or chunk) instead of its windows",
    )
    parser.add_argument(
        "--aggregate",
        choices=AGGREGATES,
        default=None,
        help="how a document's window scores make its score: max (its best window; the default), max-mean (mean "
        "of the best window and the pooled vector), top2 (mean of the two best)",
    )
    parser.add_argument(
        "--output-format",
        choices=OUTPUT_FORMATS,
        default="store",
        help="store: a store folder (store.json and index/) that `search`, LangChain's FaissVectorStore.load_local "
        "and LlamaIndex's FairFaissVectorStore.from_persist_dir open (the default); index: the command's earlier "
        "index folder (index files, documents.jsonl, manifest.json; pooled unless --multivector), for tools that "
        "read documents.jsonl",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an index already in --output")
    parser.add_argument(
        "--skip-bad-files",
        action="store_true",
        help="index the good documents and list what was skipped, instead of refusing an input with files (or "
        "JSONL lines) that are not UTF-8, empty or whitespace-only texts, or lone surrogates (--engine local). "
        "Without it, the whole input is checked first and every problem is listed at once",
    )
    add_calibration_arguments(parser)
    add_ray_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read, (chunk,) embed, index and write; prints what was indexed and what the embedder did.

    The default output is a store folder (`fair_retrieval.stores.store_folder`), saved in one commit by the store;
    `--output-format index` writes the command's earlier index folder, into a staging folder first and moved into
    --output at the end (the manifest last). Either way an interrupted run leaves no half-written folder, and a run
    that finds another run's save in --output since it started fails with StoreConflictError rather than replace
    it unseen: run it again.
    """
    require_faiss()
    if args.qdrant is not None or args.collection is not None:
        return _run_qdrant(args)
    if args.output is None:
        raise ValueError("Say where to write: --output FOLDER, or --qdrant URL_OR_PATH with --collection NAME.")
    output: Path = args.output
    _check_output(output, args.overwrite)
    _check_not_inside(output, args.input)
    params: dict[str, Any] = parse_index_params(args.index_param)
    calibration = calibration_from_args(args)
    options = embedder_options(args, calibration=calibration)  # a bad --window-overlap fails before any work
    _check_chunk_flags(args)
    if args.factory and args.kind:
        raise ValueError("Pass either --kind or --factory, not both.")
    store = args.output_format == "store"
    multivector = args.multivector if store or args.multivector is not None else False  # index folders: pooled
    if args.aggregate is not None and multivector is False:
        if not store:
            raise ValueError("--aggregate works with --multivector (documents kept as their windows); add it.")
        raise ValueError(
            "--aggregate scores a document by its windows, which a pooled store does not keep: drop --pooled (or "
            "--multivector false)."
        )
    if not args.input.exists():
        raise FileNotFoundError(f"--input {args.input} does not exist.")
    if args.engine == "ray":
        _check_ray_options(args, options, store)
    if store:
        return _run_store(args, options, params, calibration, multivector)
    args.multivector = bool(multivector)
    args.aggregate = args.aggregate or DEFAULT_AGGREGATE  # resolved here once, for both engines
    return _run_index_folder(args, options, params, calibration)


def _run_store(
    args: argparse.Namespace,
    options: EmbedderOptions,
    params: dict[str, Any],
    calibration: Calibration | None,
    multivector: bool | None,
) -> int:
    """Build the store folder --output through the stores' core: the store's default (documents kept as their
    windows at the window study's sizes, aggregate max, a flat index) unless the flags ask for another."""
    output: Path = args.output
    base = folder_generation(output) if args.overwrite else None  # a store saved there meanwhile is not replaced
    own_windows = _window_flags_given(args)
    windows = StoreWindows() if own_windows else None  # None: the study's windows (`default_windows`)
    gpu = gpu_choice(args.gpu)
    report: EmbeddingReport | None = None
    chunking: dict[str, int] | None = None
    skipped: list[str] = []
    if args.engine == "ray":
        store = store_on_ray(args, options, params, model=model_reference(args.model), gpu=gpu, windows=windows)
        count = len(store)
    else:
        documents, skipped = _read_input(args)
        embedder = build_embedder(replace(options, show_progress_bar=True), model_reference(args.model))
        rows, chunking = _chunked(args, documents, embedder)
        store = new_folder_store(
            embedder,
            multivector=multivector,
            aggregate=args.aggregate,
            windows=windows,
            kind=args.kind,
            factory=args.factory,
            search=args.search,
            gpu=gpu,
            index_params=params,
        )
        store.add_documents([row.text for row in rows], [row.metadata for row in rows], [row.id for row in rows])
        report = embedder.last_report
        count = len(rows)
    try:
        save_store_folder(store, output, replacing=base)
    except OSError as error:  # a read-only or full --output: one line, the old folder kept
        raise _unwritable(output, "store", error) from None
    remove_index_folder_files(output)  # an earlier index folder that --overwrite replaced
    what = "chunk" if chunking is not None else "document"
    source = f" of {plural(chunking['documents'], 'document')}" if chunking is not None else ""
    print(f"Indexed {plural(count, what)}{source} into the store folder {output} ({describe_store(store)})")
    _print_skipped(skipped)
    if report is not None:
        passes = len((store.windows or StoreWindows()).calls()) if store.multivector else 1
        line = describe_report(report, calibration, what)
        print(line + (f" (the last of {passes} window passes)" if passes > 1 else ""))
    else:
        print("(--engine ray does not count the documents windowed, truncated or calibrated on its workers)")
    return 0


def _run_qdrant(args: argparse.Namespace) -> int:
    """Write documents into the Qdrant collection --collection at --qdrant, through the stores' core
    (`QdrantStore`): embedded here as a store folder's are (its windows, its flags), or, from an --input that is a
    store folder, copied with their stored windows. A collection that exists is added to (its record checked)."""
    if args.qdrant is None or args.collection is None:
        raise ValueError("Write to Qdrant with both --qdrant URL_OR_PATH and --collection NAME.")
    if args.output is not None:
        raise ValueError("Give either --output FOLDER or --qdrant with --collection, not both.")
    if args.engine == "ray" and args.shards is None:
        raise ValueError(
            "--engine ray with --qdrant keeps its embedding shards in --shards FOLDER (so an interrupted run "
            "continues): add it."
        )
    if args.engine == "local" and args.shards is not None:
        raise ValueError("--shards is where --engine ray keeps its embedding shards: add --engine ray, or drop it.")
    if args.output_format != "store" or args.factory or args.kind:
        raise ValueError("--qdrant writes the stores' default layout: drop --output-format, --kind and --factory.")
    if not args.input.exists():
        raise FileNotFoundError(f"--input {args.input} does not exist.")
    if args.qdrant == ":memory:":
        raise ValueError("--qdrant :memory: keeps nothing once the command ends; give a folder or a server's URL.")
    client = client_at(args.qdrant, os.environ.get("QDRANT_API_KEY"))
    try:
        return _write_qdrant(args, client)
    finally:
        client.close()  # a local-mode folder is free for the next process


def _write_qdrant(args: argparse.Namespace, client: Any) -> int:
    """`_run_qdrant`'s writing, with the client open."""
    where = f"the Qdrant collection {args.collection!r} at {args.qdrant}"
    if is_store_folder(args.input):
        if args.engine == "ray":
            raise ValueError(
                f"{args.input} is a store folder, copied with its windows and no model run: drop --engine ray."
            )
        source = load_store_folder(args.input, gpu=False)
        embedder = _recorded_embedder(source, args.input)
        store = _collection_store(args, client, embedder, multivector=source.multivector, windows=source.windows)
        count = store.copy_from(source)
        print(
            f"Copied {plural(count, 'document')} of the store folder {args.input} into {where} (no model run; "
            f"{describe_collection(store)})"
        )
        return 0
    options = embedder_options(args, calibration=calibration_from_args(args))
    _check_chunk_flags(args)

    def collection_store(embedder: Any) -> QdrantStore[Any]:
        windows = StoreWindows() if _window_flags_given(args) else None
        return _collection_store(args, client, embedder, multivector=args.multivector, windows=windows)

    if args.engine == "ray":  # the workers embed into --shards; their windows are written from here
        _check_ray_options(args, options, store=True)
        model = model_reference(args.model)
        store = store_on_ray(args, options, {}, model=model, gpu=False, windows=None, into=collection_store)
        print(f"Indexed the documents of {args.input} into {where} on Ray ({describe_collection(store)})")
        return 0
    documents, skipped = _read_input(args)
    embedder = build_embedder(replace(options, show_progress_bar=True), model_reference(args.model))
    rows, chunking = _chunked(args, documents, embedder)
    store = collection_store(embedder)
    store.add_documents([row.text for row in rows], [row.metadata for row in rows], [row.id for row in rows])
    what = "chunk" if chunking is not None else "document"
    print(f"Indexed {plural(len(rows), what)} into {where} ({describe_collection(store)})")
    _print_skipped(skipped)
    return 0


def describe_collection(store: QdrantStore[Any]) -> str:
    """A collection in a few words: its documents, and for a multi-vector store its window points, their number a
    document (what the sizing guides scale by) and the windows kept."""
    documents = len(store)
    if not store.multivector:
        return f"{plural(documents, 'document')} there now, pooled"
    windows = store.windows or StoreWindows()
    sizes = "+".join(str(n) for n in windows.tokens) or "the embedder's"
    boundaries = f", cut at {windows.boundaries} boundaries" if windows.boundaries else ""
    points = store.window_count()
    each = f"{points / documents:.1f} a document, " if documents else ""
    return (
        f"{plural(documents, 'document')} there now; {plural(points, 'window vector')}, {each}windows of {sizes} "
        f"tokens{boundaries}"
    )


def _collection_store(args: argparse.Namespace, client: Any, embedder: Any, **settings: Any) -> QdrantStore[Any]:
    """The store of texts over the collection --collection, with the store `settings` (multivector, windows) and
    --aggregate."""
    return QdrantStore.of_texts(
        client=client,
        collection_name=args.collection,
        embedder=embedder,
        name="fair-retrieval index",
        aggregate=args.aggregate,
        **settings,
    )


def _recorded_embedder(store: Any, folder: Path) -> Any:
    """The embedder a store folder records (rebuilt from its identity; the collection records it too)."""
    if store.recorded_identity is None:
        raise ValueError(f"{folder} records no embedder, so a collection could not check what made its vectors.")
    model, options, prompts = identity_settings(store.recorded_identity)
    return build_embedder(options, model, prompts=prompts or None)


def index_words(kind: str, index: Any) -> str:
    """An index kind in words a reader of the CLI's output understands: "compressed" (window codes in memory, exact
    vectors on disk), "custom" with the faiss factory string it was built from, else the kind's name."""
    if kind == "compressed":
        return "compressed index (window codes in memory, exact vectors on disk for the re-rank)"
    if kind == "custom":
        factory = getattr(index, "factory", None)
        return f"custom faiss index {factory!r}" if factory else "custom faiss index (a factory string's)"
    return f"{kind} index"


def describe_store(store: Any) -> str:
    """The store in a few words: size, index kind, mode, aggregate and windows."""
    index = store.index
    parts = [f"{index.dim}-d vectors, {index_words(store.kind or index.kind, index)}" if index is not None else "empty"]
    if store.multivector:
        windows = store.windows or StoreWindows()
        sizes = "+".join(str(n) for n in windows.tokens) or "the embedder's"
        boundaries = f", cut at {windows.boundaries} boundaries" if windows.boundaries else ""
        count = f"{plural(index.window_count, 'window vector')}, " if index is not None else ""
        parts.append(f"{count}windows of {sizes} tokens{boundaries}, aggregate {store.mode.aggregate}")
    else:
        parts.append("pooled")
    return "; ".join(parts)


def _window_flags_given(args: argparse.Namespace) -> bool:
    """Whether the user set the embedder's windows (--window-tokens, --window-boundaries, --window-overlap): a store
    then keeps those windows instead of the window study's."""
    return any(getattr(args, name, None) is not None for name in WINDOW_FLAGS)


def _print_skipped(skipped: list[str]) -> None:
    if skipped:
        print(f"Skipped {plural(len(skipped), 'bad entry', 'bad entries')} (--skip-bad-files):")
        for problem in skipped:
            print(f"  {problem}")


def _run_index_folder(
    args: argparse.Namespace, options: EmbedderOptions, params: dict[str, Any], calibration: Calibration | None
) -> int:
    """Write the command's earlier index folder (`--output-format index`)."""
    from fair_retrieval import FaissIndex, MultiVectorIndex

    output: Path = args.output
    base = (record_generation(output / INDEX_RECORD),)  # a run that publishes meanwhile makes ours fail, not vanish
    report: EmbeddingReport | None = None
    chunking: dict[str, int] | None = None
    with staging_folder(output) as staging:
        skipped: list[str] = []
        if args.engine == "ray":  # Ray workers read the input; ids 0..n-1 = rows of documents.jsonl, written by it
            index, count = index_on_ray(
                args,
                options,
                params,
                staging / DOCUMENTS_FILE,
                model=model_reference(args.model),
                gpu=gpu_choice(args.gpu),
            )
            recorded = options  # pooling and max_length None mean the model's own, as search reads them
        else:
            documents, skipped = _read_input(args)
            embedder = build_embedder(options, args.model)
            rows, chunking = _chunked(args, documents, embedder)
            windows = embedder.embed_document_windows([row.text for row in rows], show_progress_bar=True)
            report = embedder.last_report
            shape = {"factory": args.factory, "search": args.search} if args.factory else {"kind": args.kind or "flat"}
            if args.multivector:
                index = MultiVectorIndex(
                    windows.dim, metric="ip", gpu=gpu_choice(args.gpu), aggregate=args.aggregate, **shape, **params
                )
                index.add(windows)  # document ids 0..n-1: row numbers of documents.jsonl
            else:
                index = FaissIndex(windows.dim, metric="ip", gpu=gpu_choice(args.gpu), **shape, **params)
                index.add(windows.pooled)  # ids 0..n-1: row numbers of documents.jsonl
            recorded = replace(
                options,
                pooling=embedder.pooling,
                max_length=embedder.max_length,
                window_overlap=embedder.window_overlap,
            )
            write_documents(rows, staging / DOCUMENTS_FILE)
            count = len(rows)
        manifest = index_manifest(
            index, recorded, model=model_reference(args.model), count=count, chunking=chunking, engine=args.engine
        )
        try:
            index.save(staging)
            write_manifest(staging, manifest)
            publish(staging, output, base=base)
        except OSError as error:  # a read-only or full --output: one line, the old index kept
            raise _unwritable(output, "index", error) from None
    remove_store_folder_files(output)  # a store folder that --overwrite replaced
    what = "chunk" if chunking is not None else "document"
    source = f" of {plural(chunking['documents'], 'document')}" if chunking is not None else ""
    vectors = f", {plural(index.window_count, 'window vector')}" if isinstance(index, MultiVectorIndex) else ""
    described = f"{index.dim}-d vectors, {index_words(index.kind, index)}{vectors}"
    print(f"Indexed {plural(count, what)}{source} ({described}) into {output}")
    _print_skipped(skipped)
    if report is not None:
        print(describe_report(report, calibration, what))
    else:
        print("(--engine ray does not count the documents windowed, truncated or calibrated on its workers)")
    return 0


def _read_input(args: argparse.Namespace) -> tuple[list[Document], list[str]]:
    """The documents of --input, all checked before anything is embedded, and the problems skipped.

    Raises:
        InputProblemsError: (a ValueError) listing every problem, without --skip-bad-files.
        ValueError: an input without (good) documents.
    """
    path = Path(args.input)
    documents, problems = scan_documents(path, text_field=args.text_field, id_field=args.id_field)
    if problems and not args.skip_bad_files:
        raise InputProblemsError(path, problems)
    if not documents:
        raise no_documents_error(path, input_kind(path))
    logger.info("Read %s from %s", plural(len(documents), "document"), args.input)
    return documents, problems


def describe_report(report: EmbeddingReport, calibration: Calibration | None, what: str = "document") -> str:
    """One line for the user from an `EmbeddingReport`: how many texts were windowed, truncated and calibrated.

    Only texts the calibration changed are called calibrated: those too short for it were embedded plainly, and
    the line says so, with the length the calibration needs.

    Args:
        report: what `embed_documents` did (`FairEmbedder.last_report`).
        calibration: the calibration asked for; None for --no-calibration.
        what: the noun for the texts ("document" or "chunk").
    """
    windows = report.windows - (report.documents - report.windowed)  # the windows of the windowed texts
    parts = [f"{report.windowed} windowed" + (f" ({plural(windows, 'window')})" if report.windowed else "")]
    if report.truncated:
        share = report.cut_tokens / max(1, report.tokens)
        parts.append(f"{report.truncated} truncated ({share:.0%} of all tokens never embedded)")
    else:
        parts.append("0 truncated")
    plain = report.documents - report.calibrated
    if calibration is None or calibration.strength == 0.0:
        parts.append("none calibrated (" + ("--no-calibration)" if calibration is None else "strength 0)"))
    elif plain:
        parts.append(
            f"{report.calibrated} calibrated, {plain} plain (fewer than the {calibration.min_content_tokens} "
            "content tokens the calibration needs)"
        )
    else:
        parts.append(f"{report.calibrated} calibrated")
    return f"Embedded {plural(report.documents, what)}: " + ", ".join(parts)


def _check_chunk_flags(args: argparse.Namespace) -> None:
    """Refuse --chunk-overlap alone and bad chunk sizes before the model is loaded."""
    if args.chunk_tokens is None:
        if args.chunk_overlap is not None:
            raise ValueError("--chunk-overlap needs --chunk-tokens N (the chunk size); add it, or drop the overlap.")
        return
    chunk_plan(args.chunk_tokens, args.chunk_tokens, args.chunk_overlap)  # with a size given, the window is unused


def _check_ray_options(args: argparse.Namespace, options: EmbedderOptions, store: bool) -> None:
    """Refuse what the Ray engine does not do yet: chunking, and for the earlier index folder long-document settings
    other than the defaults (a store folder's workers embed the windows of whatever settings are given)."""
    if args.chunk_tokens is not None:
        raise ValueError("--chunk-tokens works with --engine local; chunk the documents into a JSONL file first.")
    if args.skip_bad_files:
        raise ValueError("--skip-bad-files works with --engine local; drop it, or fix the input first.")
    if store:
        return
    defaults = EmbedderOptions()
    policy = ("long_documents", "window_overlap", "window_boundaries", "window_tokens")
    if [getattr(options, name) for name in policy] != [getattr(defaults, name) for name in policy]:
        raise ValueError(
            f"--engine ray embeds long documents as the default does (--long-documents {defaults.long_documents} "
            f"--window-overlap {defaults.window_overlap} --window-boundaries {defaults.window_boundaries}, the "
            "whole window) into an index folder; drop --long-documents/--window-overlap/--window-boundaries/"
            "--window-tokens, build a store folder (no --output-format index), or use --engine local."
        )


def _chunked(
    args: argparse.Namespace, documents: list[Document], embedder: FairEmbedder
) -> tuple[list[Document], dict[str, int] | None]:
    """The rows to embed: the documents themselves, or with --chunk-tokens their chunks and the chunk settings."""
    if args.chunk_tokens is None:
        return documents, None
    window = embedder.window_content_tokens
    size, overlap = chunk_plan(window, args.chunk_tokens, args.chunk_overlap)
    if size > window:
        logger.warning(
            "--chunk-tokens %d is more than the %d content tokens of one window (max_length=%d): longer chunks are "
            "%s. Use --chunk-tokens %d or less for one window per chunk.",
            size,
            window,
            embedder.max_length,
            "split into windows and pooled" if embedder.long_documents == "windows" else "truncated",
            window,
        )
    chunks = chunk_documents(documents, embedder.tokenizer, size, overlap)
    if not chunks:
        raise ValueError(f"--input {args.input}: every document is empty or whitespace; there is nothing to chunk.")
    return chunks, {"chunk_tokens": size, "chunk_overlap": overlap, "documents": len(documents)}


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
    written = resolved_output / STORE_FILES[1]  # the store folder's index folder: the run writes into it
    if resolved_source == written or written in resolved_source.parents:
        raise ValueError(
            f"--input {source} is the folder {written.name}/ of --output {output}, where the store keeps its index; "
            "write the index to a folder outside the documents."
        )


def _check_output(output: Path, overwrite: bool) -> None:
    if output.exists() and not output.is_dir():
        raise ValueError(f"--output {output} is a file; pass a folder.")
    # checked before any work: the staging folder is created beside --output, the index moved into it
    needed = [output, output.absolute().parent] if output.is_dir() else [_nearest_folder(output)]
    for folder in needed:
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"--output {output}: {folder} is not writable; choose a writable folder.")
    if output.is_dir() and not overwrite:  # any name the run may write or remove, whoever's file it is
        ours = [name for name in REPLACED_FILES if (output / name).exists() or (output / name).is_symlink()]
        if ours:
            raise ValueError(
                f"--output {output} already holds {', '.join(ours)}, which this command writes or replaces; pass "
                "--overwrite to replace an index or store there (files no saved index or store names as its own are "
                "never removed), or choose another folder."
            )


def _nearest_folder(path: Path) -> Path:
    """The nearest existing folder above `path` (where its missing folders would be created)."""
    return next((parent for parent in path.absolute().parents if parent.is_dir()), Path(path.absolute().anchor))


def _unwritable(output: Path, what: str, error: OSError) -> ValueError:
    """The one-line error for an --output that cannot be written (read-only, full): the folder is left as it was."""
    return ValueError(
        f"--output {output}: cannot write the {what} there ({error.strerror or error}); the folder is unchanged. "
        "Choose a writable folder with free space."
    )
