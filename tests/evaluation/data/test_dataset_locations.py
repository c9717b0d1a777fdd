"""The named datasets (squad-v2, reddit, xquad:LANG, scifact): local copies, the download cache, offline errors.

Downloads are replaced by a fake `fetch` that copies fixture files, so these tests never use the network.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pytest

from fair_retrieval.evaluation.data import dataset_locations as named
from fair_retrieval.evaluation.data.dataset_locations import (
    RemoteFile,
    cache_dir,
    dataset_files,
    ensure_dataset,
    find_local,
)
from fair_retrieval.evaluation.data.load import load_task


@pytest.fixture
def online_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No local copies configured, an empty user cache under tmp_path, and downloads allowed."""
    monkeypatch.delenv(named.DATA_ENV, raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "fair-retrieval" / "data"


class FakeFetch:
    """Serves every dataset file from fixtures (SQuAD-format JSON, or the BEIR fixture folder for SciFact)."""

    def __init__(self, fixtures: Path) -> None:
        self.fixtures = fixtures
        self.asked: list[str] = []

    def __call__(self, remote: RemoteFile, target: Path) -> None:
        self.asked.append(remote.url)
        beir = self.fixtures / "beir_tiny"
        if remote.path.endswith(".json"):
            shutil.copyfile(self.fixtures / "squad_tiny.json", target)
        elif remote.path.endswith(".jsonl"):
            shutil.copyfile(beir / Path(remote.path).name, target)
        else:
            shutil.copyfile(beir / "qrels" / "test.tsv", target)


def test_first_use_downloads_into_the_cache_then_reuses_it(online_user: Path, fixtures: Path, count_tokens) -> None:
    fetch = FakeFetch(fixtures)
    assert ensure_dataset("squad-v2", fetch=fetch) == online_user == cache_dir()
    assert fetch.asked == ["https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v2.0.json"]
    assert (online_user / "squad-v2-dev" / "dev-v2.0.json").is_file()
    assert ensure_dataset("squad-v2", fetch=fetch) == online_user and len(fetch.asked) == 1  # cached
    task = load_task("squad-v2", count_tokens, max_tokens=128)
    assert task.name == "squad-v2@128" and "q1" in task.queries


def test_reddit_is_squadshifts_reddit_in_squad_format(online_user: Path, fixtures: Path, count_tokens) -> None:
    fetch = FakeFetch(fixtures)
    [remote] = dataset_files("reddit")
    assert remote.path == "squadshifts-reddit/reddit_v1.0.json" and remote.url.endswith("/datasets/reddit_v1.0.json")
    assert ensure_dataset("reddit", fetch=fetch) == online_user and fetch.asked == [remote.url]
    task = load_task("reddit", count_tokens, max_tokens=128)
    assert task.name == "reddit@128" and "q1" in task.queries and task.positions


def test_scifact_downloads_beirs_zip_once_and_extracts_its_files(
    online_user: Path, fixtures: Path, count_tokens, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:  # the layout of BEIR's scifact.zip
        for file in (fixtures / "beir_tiny").rglob("*"):
            if file.is_file():
                zipped.write(file, "scifact/" + file.relative_to(fixtures / "beir_tiny").as_posix())
    opened: list[str] = []

    def urlopen(url: str, timeout: float) -> io.BytesIO:
        opened.append(url)
        return io.BytesIO(archive.getvalue())

    monkeypatch.setattr(named.urllib.request, "urlopen", urlopen)  # the real download code, no network
    task = load_task("scifact", count_tokens)
    assert task.name == "scifact" and task.qrels == {"t1": {"d1": 2}, "t2": {"d2": 1}}
    assert opened == ["https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip"]
    assert sorted(p.relative_to(online_user).as_posix() for p in online_user.rglob("*") if p.is_file()) == [
        "scifact/corpus.jsonl",
        "scifact/qrels/test.tsv",
        "scifact/queries.jsonl",
    ]  # the archive is removed once extracted; no partial files
    assert load_task("scifact", count_tokens).qrels == task.qrels and len(opened) == 1


def test_xquad_file_and_unknown_language(online_user: Path, fixtures: Path) -> None:
    [remote] = dataset_files("xquad:de")
    assert remote.path == "xquad/xquad.de.json" and remote.url.endswith("/xquad.de.json")
    with pytest.raises(ValueError, match="XQuAD language"):
        dataset_files("xquad:xx")
    with pytest.raises(ValueError, match="not a named dataset"):
        dataset_files("squad")


def test_offline_error_names_every_file_and_its_source(
    online_user: Path, fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fetch = FakeFetch(fixtures)
    with pytest.raises(FileNotFoundError) as caught:
        ensure_dataset("scifact", fetch=fetch)
    message = str(caught.value)
    assert fetch.asked == []  # offline: nothing is attempted
    for remote in dataset_files("scifact"):
        assert remote.path in message and remote.url in message
    assert "--data-dir" in message and "FAIR_RETRIEVAL_DATA" in message


def test_a_failed_download_is_the_same_clear_error(online_user: Path) -> None:
    def no_network(remote: RemoteFile, target: Path) -> None:
        raise OSError("Network is unreachable")

    with pytest.raises(FileNotFoundError, match=r"(?s)Network is unreachable.*xquad/xquad\.en\.json"):
        ensure_dataset("xquad:en", fetch=no_network)
    assert not (online_user / "xquad" / "xquad.en.json").exists()


def test_local_copies_win_and_are_never_downloaded_into(
    online_user: Path, tmp_path: Path, fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "mine"
    (local / "xquad").mkdir(parents=True)
    shutil.copyfile(fixtures / "squad_tiny.json", local / "xquad" / "xquad.en.json")
    fetch = FakeFetch(fixtures)
    assert ensure_dataset("xquad:en", data_dir=local, fetch=fetch) == local
    monkeypatch.setenv(named.DATA_ENV, str(local))
    assert ensure_dataset("xquad:en", fetch=fetch) == local and find_local("xquad:en") == local
    with pytest.raises(FileNotFoundError, match=r"Not found in .*mine"):
        ensure_dataset("squad-v2", fetch=fetch)  # a local folder is named: no download
    assert fetch.asked == []
    # SciFact's CSV release counts as a local copy too
    shutil.copytree(fixtures / "scifact_tiny", local / "scifact")
    assert find_local("scifact") == local


def test_shared_layout_is_a_valid_data_folder() -> None:
    from tests.evaluation.conftest import shared_data_or_skip

    root = shared_data_or_skip()
    for name in ("squad-v2", "reddit", "xquad:de", "scifact"):
        assert find_local(name, root) == root
