"""Turning a `--data` value into a `RetrievalTask`: named datasets, the needle benchmark, paths, Hub ids.

Accepted values:
    needle                      the synthetic benchmark over Python's own docs (no data needed)
    squad-v2                    SQuAD v2.0 dev, paragraphs joined to the token budget
    xquad:LANG                  XQuAD in LANG (ar, de, el, en, es, hi, ro, ru, th, tr, vi, zh), same construction
    scifact                     SciFact claims → abstracts, BEIR test split
                                (these three: local copies or downloaded on first use, see `evaluation.datasets`)
    PATH                        a SQuAD JSON file, a BEIR folder, a SciFact CSV folder, a PosIR domain folder,
                                a NanoBEIR folder, or a FineWeb-PosQ / SQuAD-PosQ data file or folder
    hub:fineweb-posq | hub:squad-posq | hub:nanobeir:NAME | hub:posir:LANG/DOMAIN
                                the published benchmarks, downloaded from the Hugging Face Hub (online users)
"""

from __future__ import annotations

from pathlib import Path

from fair_retrieval.evaluation import hub
from fair_retrieval.evaluation.beir import load_beir, load_scifact
from fair_retrieval.evaluation.datasets import (
    DATA_ENV,
    XQUAD_LANGUAGES,
    default_data_dir,
    ensure_dataset,
    is_named_dataset,
)
from fair_retrieval.evaluation.needle import build_needle_benchmark
from fair_retrieval.evaluation.squad import TokenCounter, build_position_benchmark
from fair_retrieval.evaluation.task import RetrievalTask

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
            and their sources).
        ValueError: for a value that names nothing known.
    """
    if spec == "needle":
        return build_needle_benchmark(count_tokens, max_tokens, num_documents=needle_documents)
    if spec.startswith("hub:"):
        return hub.load_from_hub(spec[len("hub:") :], count_tokens=count_tokens)
    if is_named_dataset(spec):
        root = ensure_dataset(spec, data_dir)
        if spec == "squad-v2":
            return build_position_benchmark(root / "squad-v2-dev" / "dev-v2.0.json", count_tokens, max_tokens, spec)
        if spec == "scifact":
            folder = root / "scifact"
            return load_scifact(folder) if (folder / "corpus_train.csv").is_file() else load_beir(folder, name=spec)
        language = spec.split(":", 1)[1]
        return build_position_benchmark(root / "xquad" / f"xquad.{language}.json", count_tokens, max_tokens, spec)
    path = Path(spec)
    if path.exists():
        return load_path(path, count_tokens, max_tokens)
    raise ValueError(
        f"--data {spec!r} is neither a known dataset (needle, squad-v2, xquad:LANG, scifact, hub:…) nor an "
        "existing path."
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
    if (path / "queries.parquet").is_file() and (path / "corpus.parquet").is_file():
        return hub.load_posir(path)
    if (path / "corpus").is_dir() and (path / "queries").is_dir():
        return hub.load_nanobeir(path)
    return hub.load_posq_folder(path, count_tokens=count_tokens)


def _looks_like_squad(path: Path) -> bool:
    with path.open(encoding="utf-8") as handle:
        head = handle.read(4096)
    return '"data"' in head and ('"paragraphs"' in head or '"title"' in head)
