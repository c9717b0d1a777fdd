"""Turning a `--data` value into a `RetrievalTask`: named datasets, the needle benchmark, paths, Hub ids.

Accepted values:
    needle                      the synthetic benchmark over Python's own docs (no data needed)
    squad-v2                    SQuAD v2.0 dev, paragraphs joined to the token budget
    reddit                      SQuADShifts reddit (a domain shift from Wikipedia), consecutive posts joined likewise
    xquad:LANG                  XQuAD in LANG (ar, de, el, en, es, hi, ro, ru, th, tr, vi, zh), same construction
    scifact                     SciFact claims → abstracts, BEIR test split
                                (these four: local copies, or downloaded once: `evaluation.data.dataset_locations`)
    cacm                        CACM (SMART files in `cacm/` of the data folder; local copies only, never downloaded)
    PATH                        a SQuAD JSON file, a BEIR folder, a SciFact CSV folder, a CACM folder, a PosIR
                                domain folder, a NanoBEIR folder, or a FineWeb-PosQ / SQuAD-PosQ data file or folder
    hub:fineweb-posq | hub:squad-posq | hub:nanobeir:NAME | hub:posir:LANG/DOMAIN
                                the published benchmarks, downloaded from the Hugging Face Hub (online users)
"""

from __future__ import annotations

import json
from pathlib import Path

from fair_retrieval.evaluation.data import hub
from fair_retrieval.evaluation.data.beir import load_beir, load_scifact
from fair_retrieval.evaluation.data.cacm import find_cacm, is_cacm_folder, load_cacm
from fair_retrieval.evaluation.data.dataset_locations import (
    DATA_ENV,
    XQUAD_LANGUAGES,
    cache_dir,
    default_data_dir,
    ensure_dataset,
    is_named_dataset,
)
from fair_retrieval.evaluation.data.needle import build_needle_benchmark
from fair_retrieval.evaluation.data.squad import build_position_benchmark
from fair_retrieval.evaluation.data.task import RetrievalTask
from fair_retrieval.evaluation.data.tokens import TokenCounter
from fair_retrieval.inputs import TEXT_SUFFIXES, visible_files

__all__ = ["DATA_ENV", "XQUAD_LANGUAGES", "default_data_dir", "load_path", "load_task"]


def load_task(
    spec: str,
    count_tokens: TokenCounter,
    max_tokens: int = 512,
    data_dir: str | Path | None = None,
    needle_documents: int | None = 60,
) -> RetrievalTask:
    """Build the task that `spec` names (see the module docstring for the accepted values).

    Args:
        spec: the `--data` value.
        count_tokens: the model's token counter, for the token budget of position benchmarks.
        max_tokens: token budget of joined documents (position benchmarks and needle).
        data_dir: folder of local copies of the named datasets; None looks in $FAIR_RETRIEVAL_DATA, then in the
            download cache, and downloads what is missing.
        needle_documents: size of the needle benchmark.

    Raises:
        FileNotFoundError: if a named dataset is not there and cannot be downloaded (the message lists its files
            and their sources; CACM is never downloaded).
        ValueError: for a value that names nothing known.
    """
    if spec == "needle":
        return build_needle_benchmark(count_tokens, max_tokens, num_documents=needle_documents)
    if spec == "cacm":
        given = data_dir if data_dir is not None else default_data_dir()
        return load_cacm(find_cacm([Path(given).expanduser()] if given is not None else [cache_dir()]))
    if spec.startswith("hub:"):
        return hub.load_from_hub(spec[len("hub:") :], count_tokens=count_tokens)
    if is_named_dataset(spec):
        root = ensure_dataset(spec, data_dir)
        if spec == "squad-v2":
            return build_position_benchmark(root / "squad-v2-dev" / "dev-v2.0.json", count_tokens, max_tokens, spec)
        if spec == "reddit":
            path = root / "squadshifts-reddit" / "reddit_v1.0.json"
            return build_position_benchmark(path, count_tokens, max_tokens, spec)
        if spec == "scifact":
            folder = root / "scifact"
            return load_scifact(folder) if (folder / "corpus_train.csv").is_file() else load_beir(folder, name=spec)
        language = spec.split(":", 1)[1]
        return build_position_benchmark(root / "xquad" / f"xquad.{language}.json", count_tokens, max_tokens, spec)
    path = Path(spec)
    if path.exists():
        return load_path(path, count_tokens, max_tokens)
    raise ValueError(
        f"--data {spec!r} is neither a known dataset (needle, squad-v2, reddit, xquad:LANG, scifact, cacm, hub:…) "
        "nor an existing path."
    )


def load_path(path: Path, count_tokens: TokenCounter, max_tokens: int = 512) -> RetrievalTask:
    """Recognise the format of a local file or folder and load it."""
    if path.is_file():
        if path.suffix == ".json" and _looks_like_squad(path):
            return build_position_benchmark(path, count_tokens, max_tokens, path.stem)
        return hub.load_posq_file(path, count_tokens=count_tokens)
    if (path / "corpus.jsonl").is_file() or (path / "corpus.jsonl.gz").is_file():
        return load_beir(path)
    if (path / "corpus_train.csv").is_file():
        return load_scifact(path)
    if is_cacm_folder(path):
        return load_cacm(path, name=path.name)
    if (path / "queries.parquet").is_file() and (path / "corpus.parquet").is_file():
        return hub.load_posir(path)
    if (path / "corpus").is_dir() and (path / "queries").is_dir():
        return hub.load_nanobeir(path)
    return hub.load_posq_folder(path, count_tokens=count_tokens)


# Keys that mark a JSONL line as a benchmark record (a query with its answer) rather than a document to index.
_QUERY_KEYS = frozenset({"question", "query", "queries", "answers", "answer", "qrels", "positive", "positives"})
_BENCHMARK_SUFFIXES = frozenset({".json", ".jsonl", ".gz", ".parquet", ".csv", ".tsv"})


def is_document_corpus(spec: str | Path, text_field: str = "text") -> bool:
    """True when `spec` is a corpus with no queries — what `fair-retrieval index` reads — not a benchmark.

    A folder of .txt/.md files (with no benchmark files beside them), or a .jsonl file whose first record has
    `text_field` and no query-like key ("question", "query", "answers", …). Such corpora are measured label-free,
    with probe queries drawn from their own sentences.
    """
    path = Path(spec)
    if path.is_dir():
        files = visible_files(path)
        has_text = any(f.suffix.lower() in TEXT_SUFFIXES for f in files)
        return has_text and not any(f.suffix.lower() in _BENCHMARK_SUFFIXES for f in files)
    if path.is_file() and path.suffix.lower() == ".jsonl":
        with path.open(encoding="utf-8", errors="replace") as handle:
            first = next((line for line in handle if line.strip()), "")
        try:
            record = json.loads(first)
        except json.JSONDecodeError:
            return False
        return isinstance(record, dict) and text_field in record and not (_QUERY_KEYS & set(record))
    return False


def _looks_like_squad(path: Path) -> bool:
    with path.open(encoding="utf-8") as handle:
        head = handle.read(4096)
    return '"data"' in head and ('"paragraphs"' in head or '"title"' in head)
