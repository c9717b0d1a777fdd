"""FaissVectorStore records which embeddings made its vectors (store.json "embedder") and checks it on load."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, FakeEmbeddings
from langchain_fair import FairEmbeddings, FaissVectorStore

from fair_retrieval import Calibration, FairEmbedder
from tests.sealing import sealed_store_copy

FIXTURES = Path(__file__).parent / "fixtures"
TEXTS = ["The ferry leaves at nine.", "The bakery opens at six.", "Trains run hourly."]


@pytest.fixture(scope="module")
def shared(tiny_model: str) -> FairEmbedder:
    return FairEmbedder(tiny_model, max_length=64, device="cpu")


def _saved(tmp_path: Path, embeddings: object) -> Path:
    store = FaissVectorStore.from_texts(  # pooled: its identity is the embeddings' alone
        TEXTS,
        embeddings,  # type: ignore[arg-type]
        ids=["a", "b", "c"],
        gpu=False,
        multivector=False,
    )
    return store.save_local(tmp_path / "store")


def test_store_json_records_the_identity_of_fair_embeddings(shared: FairEmbedder, tmp_path: Path) -> None:
    embeddings = FairEmbeddings(embedder=shared, calibration=Calibration(strength=0.5))
    folder = _saved(tmp_path, embeddings)
    recorded = json.loads((folder / "store.json").read_text())["embedder"]
    assert recorded == dict(shared.identity(), calibration=Calibration(strength=0.5).to_dict())
    assert recorded["max_length"] == 64 and recorded["pooling"] == "mean"
    again = FairEmbeddings(embedder=shared, calibration=Calibration(strength=0.5))
    assert FaissVectorStore.load_local(folder, again, gpu=False).ids == ["a", "b", "c"]


def test_another_configuration_is_refused_listing_the_fields(
    shared: FairEmbedder, tiny_model: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _saved(tmp_path, FairEmbeddings(embedder=shared))
    with pytest.raises(ValueError, match="calibration") as caught:
        FaissVectorStore.load_local(folder, FairEmbeddings(embedder=shared, calibration=None), gpu=False)
    assert "allow_embedder_mismatch=True" in str(caught.value) and "max_length" not in str(caught.value)
    narrow = FairEmbeddings(embedder=FairEmbedder(tiny_model, max_length=32, device="cpu"))
    with pytest.raises(ValueError, match=r"max_length: 64 \(recorded\) ≠ 32 \(now\)"):
        FaissVectorStore.load_local(folder, narrow, gpu=False)
    with caplog.at_level(logging.WARNING):
        loaded = FaissVectorStore.load_local(folder, narrow, gpu=False, allow_embedder_mismatch=True)
    assert loaded.ids == ["a", "b", "c"]
    assert any("max_length" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_other_embeddings_are_checked_by_class_and_model(tmp_path: Path) -> None:
    folder = _saved(tmp_path, DeterministicFakeEmbedding(size=8))
    assert json.loads((folder / "store.json").read_text())["embedder"] == {
        "class": "langchain_core.embeddings.fake.DeterministicFakeEmbedding",
        "model": None,
    }
    FaissVectorStore.load_local(folder, DeterministicFakeEmbedding(size=8), gpu=False)
    with pytest.raises(ValueError, match="class"):
        FaissVectorStore.load_local(folder, FakeEmbeddings(size=8), gpu=False)


def test_a_first_release_store_loads_saying_it_cannot_be_checked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = sealed_store_copy(FIXTURES / "store_v1_cosine_flat", tmp_path / "old")  # its files committed
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.identity"):
        loaded = FaissVectorStore.load_local(folder, FakeEmbeddings(size=8), gpu=False)
    assert len(loaded) == 3
    assert any("cannot check" in r.getMessage() for r in caplog.records if r.levelname == "INFO")


@pytest.mark.parametrize("multivector", [False, True])
def test_merge_from_checks_the_embedder_as_load_local_does(
    shared: FairEmbedder, tiny_model: str, multivector: bool, caplog: pytest.LogCaptureFixture
) -> None:
    mean = FaissVectorStore.from_texts(
        TEXTS[:2], FairEmbeddings(embedder=shared), ids=["a", "b"], gpu=False, multivector=multivector
    )
    cls_pooled = FairEmbeddings(embedder=FairEmbedder(tiny_model, max_length=64, pooling="cls", device="cpu"))
    other = FaissVectorStore.from_texts(TEXTS[2:], cls_pooled, ids=["c"], gpu=False, multivector=multivector)
    with pytest.raises(ValueError, match=r"merge_from was built by another embedder configuration: pooling: "):
        mean.merge_from(other)
    assert mean.ids == ["a", "b"]
    with pytest.raises(ValueError, match=r'"cls" \(recorded\) ≠ "mean" \(now\).*allow_embedder_mismatch=True'):
        mean.merge_from(other)
    with caplog.at_level(logging.WARNING):
        mean.merge_from(other, allow_embedder_mismatch=True)
    assert mean.ids == ["a", "b", "c"] and any("pooling" in r.getMessage() for r in caplog.records)
    same = FaissVectorStore.from_texts(
        ["one more"], FairEmbeddings(embedder=shared), ids=["d"], gpu=False, multivector=multivector
    )
    mean.merge_from(same)  # the same configuration merges
    assert mean.ids == ["a", "b", "c", "d"]


def _qdrant_collection(tmp_path: Path) -> Path:
    pytest.importorskip("qdrant_client")
    from langchain_fair import FairQdrantVectorStore

    made = FairQdrantVectorStore.from_texts(
        TEXTS, DeterministicFakeEmbedding(size=8), path=str(tmp_path / "q"), collection_name="docs"
    )
    made.client.close()
    return tmp_path / "q"


def test_embeddings_of_another_size_are_refused_when_a_store_opens(tmp_path: Path) -> None:
    """The embeddings cannot tell their size, so a probe query asks them, as langchain-qdrant does: a folder and a
    collection are refused at open, before any search, with both sizes named."""
    folder = _saved(tmp_path, DeterministicFakeEmbedding(size=8))
    with pytest.raises(ValueError, match="make 16-d vectors, but this store holds 8-d ones"):
        FaissVectorStore.load_local(folder, DeterministicFakeEmbedding(size=16), gpu=False)
    from langchain_fair import FairQdrantVectorStore

    where = str(_qdrant_collection(tmp_path))
    with pytest.raises(ValueError, match="make 16-d vectors, but this store holds 8-d ones"):
        FairQdrantVectorStore.from_existing_collection("docs", DeterministicFakeEmbedding(size=16), path=where)
    reopened = FairQdrantVectorStore.from_existing_collection("docs", DeterministicFakeEmbedding(size=8), path=where)
    assert len(reopened.get_by_ids(["missing"])) == 0
    reopened.client.close()


def test_a_failed_open_releases_the_local_folder_it_locked(tmp_path: Path) -> None:
    from langchain_fair import FairQdrantVectorStore

    where = str(_qdrant_collection(tmp_path))
    for _ in range(2):  # a second refusal: the first released the folder
        with pytest.raises(ValueError, match="class"):
            FairQdrantVectorStore.from_existing_collection("docs", FakeEmbeddings(size=8), path=where)
        with pytest.raises(ValueError, match="no collection 'other'"):
            FairQdrantVectorStore.from_existing_collection("other", DeterministicFakeEmbedding(size=8), path=where)
    from qdrant_client import QdrantClient

    QdrantClient(path=where).close()  # opens: no client of this process holds it
