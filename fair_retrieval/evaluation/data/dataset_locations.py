"""The named evaluation datasets (`squad-v2`, `reddit`, `xquad:LANG`, `scifact`): where their files are, fetching them.

Each dataset is a few files with a fixed place in a data folder:

    squad-v2     squad-v2-dev/dev-v2.0.json                       SQuAD 2.0 dev set (rajpurkar.github.io)
    reddit       squadshifts-reddit/reddit_v1.0.json              SQuADShifts reddit: posts, SQuAD-style questions
                                                                  (github.com/modestyachts/squadshifts-website)
    xquad:LANG   xquad/xquad.LANG.json                            XQuAD (github.com/google-deepmind/xquad)
    scifact      scifact/corpus.jsonl, queries.jsonl,             SciFact in BEIR form (BEIR's scifact.zip,
                 qrels/test.tsv                                   public.ukp.informatik.tu-darmstadt.de)

A folder with SciFact's CSV release (`scifact/corpus_train.csv`, `claims_validation.csv`) works as well.

Where the files are looked for, in order: the folder given as `data_dir` (`--data-dir`), the folder in
`$FAIR_RETRIEVAL_DATA`, and the user's cache (`$XDG_CACHE_HOME/fair-retrieval/data`, else
`~/.cache/fair-retrieval/data`). Files missing from the cache are downloaded into it on first use; local folders
are never written to. Offline (or with `HF_HUB_OFFLINE=1`), a missing file is an error that names each file and
where to get it.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DATA_ENV = "FAIR_RETRIEVAL_DATA"
NAMED_DATASETS = ("squad-v2", "reddit", "xquad:LANG", "scifact")
XQUAD_LANGUAGES = ("ar", "de", "el", "en", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh")

_SQUAD_URL = "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v2.0.json"
_REDDIT_URL = "https://raw.githubusercontent.com/modestyachts/squadshifts-website/master/datasets/reddit_v1.0.json"
_XQUAD_URL = "https://raw.githubusercontent.com/google-deepmind/xquad/master/xquad.{language}.json"
_BEIR_SCIFACT_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip"
_TIMEOUT_S = 60
_ARCHIVES = ".archives"  # downloaded zip files, inside the cache, removed once their files are extracted


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset: its place inside a data folder and its public source.

    Attributes:
        path: relative path inside the data folder (POSIX form).
        url: where it is downloaded from (a zip archive when `member` is set).
        member: the file's name inside the zip archive at `url`, or None for a plain file.
    """

    path: str
    url: str
    member: str | None = None


SCIFACT_FILES = tuple(
    RemoteFile(f"scifact/{name}", _BEIR_SCIFACT_URL, member=f"scifact/{name}")
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")
)
# SciFact's CSV release (claims → abstracts) is recognised in local folders too.
SCIFACT_CSV_FILES = ("scifact/corpus_train.csv", "scifact/claims_validation.csv")


def dataset_files(name: str) -> tuple[RemoteFile, ...]:
    """The files of the named dataset (`squad-v2`, `reddit`, `xquad:LANG` or `scifact`).

    Raises:
        ValueError: for a name that is not one of them, or an unknown XQuAD language.
    """
    if name == "squad-v2":
        return (RemoteFile("squad-v2-dev/dev-v2.0.json", _SQUAD_URL),)
    if name == "reddit":
        return (RemoteFile("squadshifts-reddit/reddit_v1.0.json", _REDDIT_URL),)
    if name == "scifact":
        return SCIFACT_FILES
    if name.startswith("xquad:"):
        language = name.split(":", 1)[1]
        if language not in XQUAD_LANGUAGES:
            raise ValueError(f"Unknown XQuAD language {language!r}; choose one of {', '.join(XQUAD_LANGUAGES)}.")
        return (RemoteFile(f"xquad/xquad.{language}.json", _XQUAD_URL.format(language=language)),)
    raise ValueError(f"{name!r} is not a named dataset; choose one of {', '.join(NAMED_DATASETS)}.")


def is_named_dataset(name: str) -> bool:
    """True for the `--data` values this module serves (squad-v2, reddit, xquad:LANG, scifact)."""
    return name in ("squad-v2", "reddit", "scifact") or name.startswith("xquad:")


def default_data_dir() -> Path | None:
    """The folder of local copies named by `$FAIR_RETRIEVAL_DATA`, or None when it is not set."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else None


def cache_dir() -> Path:
    """Where downloaded datasets are kept: `$XDG_CACHE_HOME/fair-retrieval/data`, else `~/.cache/...`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fair-retrieval" / "data"


def find_local(name: str, data_dir: str | Path | None = None) -> Path | None:
    """The data folder that already holds every file of `name`, without downloading; None if none does.

    Looks in `data_dir` if given, else in `$FAIR_RETRIEVAL_DATA`, then in the download cache.
    """
    for root in _search_roots(data_dir):
        if _complete(name, root):
            return root
    return None


def ensure_dataset(
    name: str, data_dir: str | Path | None = None, fetch: Callable[[RemoteFile, Path], None] | None = None
) -> Path:
    """The data folder holding every file of `name`, downloading missing files into the cache on first use.

    Args:
        name: `squad-v2`, `xquad:LANG` or `scifact`.
        data_dir: a folder of local copies (`--data-dir`); when given, nothing is downloaded.
        fetch: how one file is downloaded to a destination path (tests pass a fake); default: `download`.

    Returns:
        The folder in which the dataset's files sit at their relative paths.

    Raises:
        FileNotFoundError: if the files are in none of the places and cannot be downloaded (offline, or a local
            folder was named); the message lists each file and its source.
        ValueError: for a name that is not a named dataset.
    """
    files = dataset_files(name)
    found = find_local(name, data_dir)
    if found is not None:
        return found
    explicit = data_dir is not None or default_data_dir() is not None
    if explicit:
        where = Path(data_dir) if data_dir is not None else default_data_dir()
        raise FileNotFoundError(_missing_message(name, files, f"Not found in {where}", where))
    if _offline():
        raise FileNotFoundError(
            _missing_message(name, files, "HF_HUB_OFFLINE is set, so nothing is downloaded", cache_dir())
        )
    root = cache_dir()
    fetch = fetch or download
    for remote in files:
        target = root / remote.path
        if target.is_file():
            continue
        logger.info("Downloading %s (%s) to %s", remote.path, remote.url, target)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fetch(remote, target)
        except Exception as error:  # network errors, HTTP errors, a damaged archive
            raise FileNotFoundError(
                _missing_message(name, files, f"Downloading {remote.url} failed ({error})", root)
            ) from error
    shutil.rmtree(root / _ARCHIVES, ignore_errors=True)  # every file is extracted: the archives are not needed
    return root


def download(remote: RemoteFile, target: Path) -> None:
    """Download one file to `target`; a file inside a zip archive is extracted from the archive (downloaded once).

    Every write goes through a temporary file and a rename, so an interrupted download leaves no partial file.
    """
    if remote.member is None:
        _fetch_url(remote.url, target)
        return
    archive = target.parents[len(Path(remote.path).parts) - 1] / _ARCHIVES / remote.url.rsplit("/", 1)[-1]
    if not archive.is_file():
        archive.parent.mkdir(parents=True, exist_ok=True)
        _fetch_url(remote.url, archive)
    with zipfile.ZipFile(archive) as zipped, zipped.open(remote.member) as source:
        _write_stream(source, target)


def _fetch_url(url: str, target: Path) -> None:
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
        _write_stream(response, target)


def _write_stream(source: Any, target: Path) -> None:
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            shutil.copyfileobj(source, out)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _search_roots(data_dir: str | Path | None) -> list[Path]:
    if data_dir is not None:
        return [Path(data_dir).expanduser()]
    env = default_data_dir()
    return [env] if env is not None else [cache_dir()]


def _complete(name: str, root: Path) -> bool:
    if name == "scifact" and all((root / path).is_file() for path in SCIFACT_CSV_FILES):
        return True
    return all((root / remote.path).is_file() for remote in dataset_files(name))


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _missing_message(name: str, files: tuple[RemoteFile, ...], reason: str, root: Path | None) -> str:
    lines = [f"--data {name}: {reason}. It needs these files (relative to a data folder):"]
    lines += [f"  {remote.path}   from {remote.url}" for remote in files]
    if name == "scifact":
        lines.append(f"  (or SciFact's CSV release: {', '.join(SCIFACT_CSV_FILES)})")
    lines.append(
        f"Download them into a folder and pass it with --data-dir or {DATA_ENV}, or run once online to fill the "
        f"cache ({cache_dir()})."
    )
    return "\n".join(lines)
