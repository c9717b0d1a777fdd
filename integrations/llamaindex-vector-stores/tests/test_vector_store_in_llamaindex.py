"""FairFaissVectorStore in LlamaIndex end to end: packaging, a real model through VectorStoreIndex, the GPU path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.schema import TextNode
from llama_index.embeddings.fair import FairEmbedding

from fair_retrieval import FairEmbedder

PACKAGE = Path(__file__).resolve().parents[1]


def _nodes(texts: list[str]) -> list[TextNode]:
    return [TextNode(text=text, id_=f"doc-{position}") for position, text in enumerate(texts)]


def test_namespace_packages_have_no_init_file() -> None:
    # PEP 420: other llama-index distributions (llama-index-vector-stores-faiss, …) share llama_index/ and
    # llama_index/vector_stores/.
    assert not (PACKAGE / "llama_index" / "__init__.py").exists()
    assert not (PACKAGE / "llama_index" / "vector_stores" / "__init__.py").exists()
    import llama_index.vector_stores.fair as fair
    import llama_index.vector_stores.faiss

    assert fair.FairFaissVectorStore.class_name() == "FairFaissVectorStore"
    assert Path(fair.__file__).is_relative_to(PACKAGE)
    assert llama_index.vector_stores.faiss.FaissVectorStore is not None  # the namespace is still shared


def test_fair_faiss_vector_store_round_trip_on_cpu(minilm: FairEmbedder, tmp_path: Path) -> None:
    from llama_index.vector_stores.fair import FairFaissVectorStore

    texts = ["The ferry stops in strong wind.", "The bakery opens at six.", "Chess on Thursdays."]
    embed_model = FairEmbedding(embedder=minilm)
    store = FairFaissVectorStore.create(dim=minilm.dimension, gpu="auto")  # CPU here: faiss-cpu
    index = VectorStoreIndex(
        _nodes(texts), storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
    )
    index.storage_context.persist(persist_dir=str(tmp_path))
    loaded_store = FairFaissVectorStore.from_persist_dir(str(tmp_path))
    assert isinstance(loaded_store, FairFaissVectorStore)
    context = StorageContext.from_defaults(vector_store=loaded_store, persist_dir=str(tmp_path))
    loaded = load_index_from_storage(context, embed_model=embed_model)
    assert loaded.as_retriever(similarity_top_k=1).retrieve("When does the ferry stop?")[0].node.node_id == "doc-0"
    with pytest.raises(ValueError, match="metric"):
        FairFaissVectorStore.create(dim=4, metric="dot")  # type: ignore[arg-type]


def test_fair_faiss_vector_store_keeps_a_gpu_index_and_persists_a_cpu_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The GPU path, through FaissIndex: faiss' GPU functions are replaced by CPU clones (this machine has
    faiss-cpu), and every transfer is counted. The store stays thin: FaissIndex does the placing and copying."""
    import faiss
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery
    from llama_index.vector_stores.fair import FairFaissVectorStore

    from fair_retrieval.index import faiss_gpu_count

    if faiss_gpu_count() == 0:
        with pytest.raises(ValueError, match="gpu=True but faiss sees no GPU"):
            FairFaissVectorStore(gpu=True)  # refused when the store is made, not on its first add

    gpu_objects: set[int] = set()
    to_cpu: list[int] = []

    def clone_to_gpu(index):  # type: ignore[no-untyped-def]
        copy = faiss.clone_index(index)
        gpu_objects.add(id(copy))
        return copy

    def gpu_to_cpu(index):  # type: ignore[no-untyped-def]
        assert id(index) in gpu_objects, "index_gpu_to_cpu called on a CPU index"
        to_cpu.append(1)
        return faiss.clone_index(index)

    monkeypatch.setattr(faiss, "StandardGpuResources", lambda: object(), raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1, raising=False)
    monkeypatch.setattr(faiss, "GpuClonerOptions", lambda: type("Options", (), {})(), raising=False)
    monkeypatch.setattr(faiss, "GpuMultipleClonerOptions", lambda: type("Options", (), {})(), raising=False)
    monkeypatch.setattr(
        faiss, "index_cpu_to_gpu", lambda res, device, index, co=None: clone_to_gpu(index), raising=False
    )
    monkeypatch.setattr(
        faiss, "index_cpu_to_all_gpus", lambda index, co=None, ngpu=-1: clone_to_gpu(index), raising=False
    )
    monkeypatch.setattr(faiss, "index_gpu_to_cpu", gpu_to_cpu, raising=False)

    store = FairFaissVectorStore.create(dim=3)  # gpu="auto": on the (stand-in) GPU
    assert store.client is not None and store.client.on_gpu
    store.add(
        [
            TextNode(id_=f"n{i}", text=f"t{i}", metadata={"i": i}, embedding=row.tolist())
            for i, row in enumerate(np.eye(3))
        ]
    )
    odd = MetadataFilters(filters=[MetadataFilter(key="i", value=[0, 2], operator="in")])
    assert store.query(VectorStoreQuery(query_embedding=[0.1, 1.0, 0.2], similarity_top_k=1, filters=odd)).ids == ["n2"]
    store.delete_nodes(node_ids=["n0"])  # faiss removes on a CPU copy; FaissIndex uploads the result again
    assert store.client.on_gpu and id(store.client._index) in gpu_objects
    converted = len(to_cpu)
    path = tmp_path / "vector_store.json"
    store.persist(str(path))  # faiss cannot write a GPU index: a CPU copy is written
    assert len(to_cpu) == converted + 1 and store.client.on_gpu
    loaded = FairFaissVectorStore.from_persist_path(str(path))
    assert loaded.client is not None and loaded.client.on_gpu and loaded.node_ids == ["n1", "n2"]
    on_cpu = FairFaissVectorStore.from_persist_path(str(path), gpu=False)
    assert on_cpu.client is not None and not on_cpu.client.on_gpu
    assert on_cpu.query(VectorStoreQuery(query_embedding=[0.0, 1.0, 0.0])).ids == ["n1"]


def test_a_cli_store_folder_persisted_from_llamaindex_keeps_one_store(
    tiny_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from langchain_fair import FairEmbeddings, FaissVectorStore
    from llama_index.core import Document
    from llama_index.vector_stores.fair import FairFaissVectorStore

    from fair_retrieval.cli import main
    from fair_retrieval.jsonio import StoreConflictError

    source = tmp_path / "docs.jsonl"
    rows = [{"id": f"d{i}", "text": f"Report {i} of the harbour ferry, pier {i}."} for i in range(30)]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    folder = tmp_path / "store"
    assert main(["index", "--model", tiny_model, "--input", str(source), "--output", str(folder)]) == 0
    embed_model = FairEmbedding(tiny_model)
    store = FairFaissVectorStore.from_persist_dir(str(folder), embed_model=embed_model)
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
    index.insert(Document(text="The night train leaves at ten.", id_="train", metadata={"line": "north"}))
    index.storage_context.persist(str(folder))
    assert not (folder / "default__vector_store.json").exists()  # the folder's one store took the node

    capsys.readouterr()
    query = ["search", str(folder), "--mode", "sparse", "-k", "100", "--json", "--query", "train ferry"]
    assert main(query) == 0
    found = {hit["id"] for hit in json.loads(capsys.readouterr().out)["results"]}
    langchain = FaissVectorStore.load_local(str(folder), FairEmbeddings(model=tiny_model))
    reloaded = FairFaissVectorStore.from_persist_dir(str(folder), embed_model=embed_model)
    expected = {f"d{i}" for i in range(30)}
    new_ids = {node.node_id for node in reloaded.get_nodes()} - expected
    assert len(new_ids) == 1 and len(found) == len(langchain.get_by_ids([*expected, *new_ids])) == 31
    assert found == expected | new_ids
    (new,) = langchain.get_by_ids(list(new_ids))
    assert (new.page_content, new.metadata) == ("The night train leaves at ten.", {"line": "north"})
    context = StorageContext.from_defaults(vector_store=reloaded, persist_dir=str(folder))
    again = load_index_from_storage(context, embed_model=embed_model)
    retrieved = again.as_retriever(similarity_top_k=100).retrieve("night train")
    assert {hit.node.node_id for hit in retrieved} == found

    fresh = FairFaissVectorStore(embed_model=embed_model)  # not opened from the folder: it does not replace it
    with pytest.raises(StoreConflictError):
        fresh.persist(str(folder / "default__vector_store.json"))
    assert (
        len(FaissVectorStore.load_local(str(folder), FairEmbeddings(model=tiny_model)).get_by_ids(list(new_ids))) == 1
    )
