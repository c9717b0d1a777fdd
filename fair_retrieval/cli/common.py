"""Helpers that several subcommands run: loading the model and the data, file names, FAISS and model references.

Command modules (`cmd_*.py`) import from here and from `options.py`, never from each other.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from pathlib import Path
from typing import Any

from fair_retrieval.cli.options import DEFAULT_DATA, embedder_options
from fair_retrieval.embedding.embedder_building import build_embedder
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.jsonio import write_atomically

logger = logging.getLogger(__name__)


def make_embedder(args: argparse.Namespace, calibration: Calibration | None = None) -> Any:
    """Load the model with the CLI's options; documents may be as long as --max-tokens unless --max-length."""
    options = embedder_options(
        args, calibration=calibration, show_progress_bar=True, max_length=args.max_length or args.max_tokens
    )
    return build_embedder(options, args.model)


def data_spec(args: argparse.Namespace) -> str:
    """The --data value, or the default (announced on stderr, so a run never silently uses a dataset)."""
    if getattr(args, "data", None) is None:
        args.data = DEFAULT_DATA
        logger.warning("No --data given: using %s (the default; see --help for the others).", DEFAULT_DATA)
    return str(args.data)


def load_data(args: argparse.Namespace, embedder: Any) -> Any:
    """The task that --data names, built with the model's tokenizer, subsampled to --max-queries.

    A corpus with no queries (a folder of .txt/.md files, or a JSONL of documents) becomes a label-free probe task.
    """
    from fair_retrieval.evaluation.data.load import is_document_corpus, load_task

    spec = data_spec(args)
    if is_document_corpus(spec, text_field=args.text_field):
        return probe_corpus(args, Path(spec), embedder)
    task = load_task(
        spec,
        embedder.token_lengths,
        args.max_tokens,
        data_dir=args.data_dir,
        needle_documents=args.needle_documents,
    )
    return task.subsample_queries(args.max_queries)


def probe_corpus(args: argparse.Namespace, path: Path, embedder: Any) -> Any:
    """Label-free probes of the documents at `path` (--text-field/--id-field, --max-probes, --probe-seed)."""
    from fair_retrieval.evaluation.probes import probe_task_for
    from fair_retrieval.inputs import read_documents

    documents = read_documents(path, text_field=args.text_field, id_field=args.id_field)
    corpus = {str(doc.id): doc.text for doc in documents}
    task = probe_task_for(
        corpus, embedder, max_probes=args.max_probes, seed=args.probe_seed, name=f"probes:{path.name}"
    )
    logger.info("%s: %d documents, %d probe queries (label-free).", path, len(task.corpus), len(task.queries))
    return task


def write_report(report: dict[str, Any], output_dir: Path, as_json: bool = False) -> None:
    """Print a report (table, or the JSON with `as_json`), write it as JSON and, with positions, the PNG plot."""
    from fair_retrieval.evaluation.evaluation_report import format_table
    from fair_retrieval.evaluation.plot import plot_by_position

    name = slug(report["task"]["name"])
    report_path = output_dir / f"{name}.json"
    dump_json(report, report_path)
    plot = plot_by_position(report, output_dir / f"{name}.png") if report["bins"] else None
    if as_json:  # stdout holds the JSON only; the files are named in the log
        print(json.dumps(report, indent=2, ensure_ascii=False))
        logger.info("report: %s; plot: %s", report_path, plot)
        return
    print(format_table(report))
    print(f"report: {report_path}")
    if plot is not None:
        print(f"plot:   {plot}")


def slug(text: str) -> str:
    """A file-name-safe version of a task name ("xquad:de@512" → "xquad-de-512")."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "task"


def dump_json(data: Any, path: Path) -> None:
    """Write `data` as indented UTF-8 JSON (atomically, so an interrupted run leaves no half file), making folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def require_faiss() -> None:
    """Fail early, as a usage error (exit code 2), when faiss is not installed."""
    from fair_retrieval.index import import_faiss

    try:
        import_faiss()
    except ImportError as error:
        raise ValueError(str(error)) from error


def gpu_choice(flag: str) -> Any:
    """Map --gpu auto/on/off to FaissIndex's gpu argument."""
    return {"auto": "auto", "on": True, "off": False}[flag]


def model_reference(model: str) -> str:
    """The model as an index manifest records it: an absolute path for a local folder (so search works from any
    working directory), else the Hub id unchanged (resolved again, e.g. to the bundled copy, when searching)."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """'1 document', '2 documents'."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"
