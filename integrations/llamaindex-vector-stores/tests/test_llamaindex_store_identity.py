"""FairFaissVectorStore records which embed model made its vectors and checks it on load
(`fair_retrieval.embedding.identity`).

LlamaIndex never hands a vector store its embed model, so the store records the one it is told about
(`embed_model=` / `record_embed_model`) and checks the one given to `from_persist_dir(..., embed_model=...)`.
"""

from __future__ import annotations

import json
import logging
import zlib
from pathlib import Path

import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.embeddings.fair import FairEmbedding
from llama_index.vector_stores.fair import FairFaissVectorStore

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.jsonio.snapshot import record_crc32

TEXTS = ["The ferry leaves at nine.", "The bakery opens at six.", "Trains run hourly."]


@pytest.fixture(scope="module")
def shared(tiny_model: str) -> FairEmbedder:
    return FairEmbedder(tiny_model, max_length=64, device="cpu")


def _persisted(tmp_path: Path, embed_model: FairEmbedding, record: bool = True) -> Path:
    store = FairFaissVectorStore.create(
        dim=embed_model.embedder.dimension,
        gpu=False,
        embed_model=embed_model if record else None,
        multivector=False,  # the identity of a pooled store is its embed model's alone
    )
    context = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex.from_documents(
        [Document(text=t) for t in TEXTS], storage_context=context, embed_model=embed_model
    )
    folder = tmp_path / "storage"
    index.storage_context.persist(str(folder))
    return folder


def _recorded(folder: Path) -> object:
    return json.loads((folder / "default__vector_store.json").read_text())["embedder"]


def test_persist_records_the_embed_model_it_was_told(shared: FairEmbedder, tmp_path: Path) -> None:
    embed_model = FairEmbedding(embedder=shared, calibration=Calibration(strength=0.5))
    folder = _persisted(tmp_path, embed_model)
    assert _recorded(folder) == dict(shared.identity(), calibration=Calibration(strength=0.5).to_dict())
    same = FairEmbedding(embedder=shared, calibration=Calibration(strength=0.5))
    loaded = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False, embed_model=same)
    assert len(loaded.node_ids) == 3 and loaded.embedder_identity == _recorded(folder)
    unchecked = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False)  # no embed model: kept, re-persisted
    unchecked.persist(str(folder / "default__vector_store.json"))
    assert _recorded(folder) == dict(shared.identity(), calibration=Calibration(strength=0.5).to_dict())


def test_another_embed_model_is_refused_unless_allowed(
    shared: FairEmbedder, tiny_model: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _persisted(tmp_path, FairEmbedding(embedder=shared))
    plain = FairEmbedding(embedder=shared, calibration=None)
    with pytest.raises(ValueError, match="calibration") as caught:
        FairFaissVectorStore.from_persist_dir(str(folder), gpu=False, embed_model=plain)
    assert "allow_embedder_mismatch=True" in str(caught.value)
    narrow = FairEmbedding(embedder=FairEmbedder(tiny_model, max_length=32, device="cpu"))
    with pytest.raises(ValueError, match=r"max_length: 64 \(recorded\) ≠ 32 \(now\)"):
        FairFaissVectorStore.from_persist_dir(str(folder), gpu=False, embed_model=narrow)
    with pytest.raises(ValueError, match="class"):
        FairFaissVectorStore.from_persist_dir(str(folder), gpu=False, embed_model=MockEmbedding(embed_dim=8))
    with caplog.at_level(logging.WARNING):
        loaded = FairFaissVectorStore.from_persist_dir(
            str(folder), gpu=False, embed_model=narrow, allow_embedder_mismatch=True
        )
    assert len(loaded.node_ids) == 3
    assert any("max_length" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_an_unrecorded_store_loads_saying_it_cannot_be_checked_and_records_it_next(
    shared: FairEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    embed_model = FairEmbedding(embedder=shared)
    folder = _persisted(tmp_path, embed_model, record=False)
    assert _recorded(folder) is None
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.identity"):
        loaded = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False, embed_model=embed_model)
    assert any("cannot check" in r.getMessage() for r in caplog.records if r.levelname == "INFO")
    loaded.persist(str(folder / "default__vector_store.json"))
    assert _recorded(folder) == shared.identity()


def test_record_embed_model_tells_a_store_after_the_fact(shared: FairEmbedder) -> None:
    store = FairFaissVectorStore.create(dim=8, gpu=False)
    assert store.embedder_identity is None
    store.record_embed_model(FairEmbedding(embedder=shared))
    assert store.embedder_identity == shared.identity()
    with pytest.raises(ValueError, match="needs an embed model"):
        store.record_embed_model(None)


def test_the_info_line_says_an_earlier_release_only_when_it_was_one(
    shared: FairEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    embed_model = FairEmbedding(embedder=shared)
    folder = _persisted(tmp_path, embed_model, record=False)  # this release, never told its embed model

    def info() -> str:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.identity"):
            FairFaissVectorStore.from_persist_dir(str(folder), gpu=False, embed_model=embed_model)
        return " ".join(r.getMessage() for r in caplog.records if "records no embedder" in r.getMessage())

    assert "never told its embed model" in info() and "earlier release" not in info()
    state = json.loads((folder / "default__vector_store.json").read_text())
    del state["embedder"]  # as the first release wrote it
    (folder / "default__vector_store.json").write_text(json.dumps(state))
    record = json.loads((folder / "default__vector_store.index" / "index.json").read_text())
    raw = (folder / "default__vector_store.json").read_bytes()  # recorded again, as that release's save did
    record["publication"]["files"]["../default__vector_store.json"] = {"bytes": len(raw), "crc32": zlib.crc32(raw)}
    record["publication"]["record_crc32"] = record_crc32(record)
    (folder / "default__vector_store.index" / "index.json").write_text(json.dumps(record))
    assert "saved by an earlier release" in info()
