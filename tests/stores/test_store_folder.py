"""Store folders: what `fair-retrieval index` writes opens in both vector stores with the results of a store each
adapter builds from the same chunks, `search` reads it, and an index folder of earlier releases still searches.

A tiny random BERT (max_length 64, so every document is cut into windows of both default sizes) keeps it fast.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fair_retrieval import FairEmbedder
from fair_retrieval.cli import main
from fair_retrieval.stores import StoreConflictError, StoreWindows
from fair_retrieval.stores.store_folder import (
    FOLDER_FORMAT,
    folder_generation,
    is_store_folder,
    load_store_folder,
    new_folder_store,
    save_store_folder,
)
from tests.models import build_tiny_model

WORDS = "harbour ferry lantern orchard granite violin comet meadow basalt quarry falcon tundra copper".split()
QUERIES = ["the ferry crosses the harbour", "granite quarry", "a comet over the tundra"]
MAX_LENGTH = "64"


def _text(seed: int) -> str:
    rng = np.random.default_rng(seed)
    paragraphs = [
        " ".join(" ".join(str(w) for w in rng.choice(WORDS, size=6)).capitalize() + "." for _ in range(3))
        for _ in range(4)
    ]
    return "\n\n".join(paragraphs)


ROWS = [{"id": f"d{i}", "text": _text(i), "metadata": {"topic": WORDS[i % 4], "n": i}} for i in range(8)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model("bert", "mean", tmp_path_factory.mktemp("tiny-store"))


@pytest.fixture(scope="module")
def built(tiny: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store folder built by `fair-retrieval index` with its defaults."""
    folder = tmp_path_factory.mktemp("store-folder")
    source = folder / "docs.jsonl"
    source.write_text("\n".join(json.dumps(row) for row in ROWS) + "\n")
    output = folder / "out"
    command = ["index", "--model", tiny, "--input", str(source), "--output", str(output), "--gpu", "off"]
    assert main([*command, "--max-length", MAX_LENGTH]) == 0
    return output


def _embedder(tiny: str) -> FairEmbedder:
    """The embedder `index` builds with its defaults and --max-length."""
    return FairEmbedder(tiny, max_length=int(MAX_LENGTH), device="cpu")


def test_the_command_builds_the_stores_default(built: Path, tiny: str) -> None:
    assert is_store_folder(built)
    assert sorted(path.name for path in built.iterdir()) == ["index", "store.json"]
    store = load_store_folder(built, gpu=False)
    embedder = _embedder(tiny)
    assert store.multivector and store.mode.aggregate == "max" and store.kind == "flat"
    content = embedder.window_content_tokens
    assert store.windows == StoreWindows((content, (content + 1) // 2), "text")
    assert [record.key for _, record in store.get([row["id"] for row in ROWS])] == [row["id"] for row in ROWS]
    index = store.index
    assert index is not None and index.window_count > 2 * len(ROWS)  # both sizes cut every document


def test_langchain_opens_the_folder_with_the_results_of_its_own_store(built: Path, tiny: str) -> None:
    pytest.importorskip("langchain_fair")
    from langchain_fair import FairEmbeddings, FaissVectorStore

    embeddings = FairEmbeddings(embedder=_embedder(tiny))
    loaded = FaissVectorStore.load_local(built, embeddings, gpu=False)
    own = FaissVectorStore.from_texts(
        [row["text"] for row in ROWS],
        embeddings,
        metadatas=[row["metadata"] for row in ROWS],
        ids=[row["id"] for row in ROWS],
        gpu=False,
    )
    assert loaded.store_identity == own.store_identity
    for query in QUERIES:
        found = loaded.similarity_search_with_score(query, k=4)
        expected = own.similarity_search_with_score(query, k=4)
        assert [(doc.id, doc.metadata) for doc, _ in found] == [(doc.id, doc.metadata) for doc, _ in expected]
        np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], rtol=1e-5, atol=1e-6)


def test_llamaindex_opens_the_folder_with_the_results_of_its_own_store(built: Path, tiny: str) -> None:
    pytest.importorskip("llama_index.vector_stores.fair")
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.embeddings.fair import FairEmbedding
    from llama_index.vector_stores.fair import FairFaissVectorStore

    embed_model = FairEmbedding(embedder=_embedder(tiny))
    loaded = FairFaissVectorStore.from_persist_dir(str(built), gpu=False, embed_model=embed_model)
    nodes = [
        TextNode(
            id_=row["id"],
            text=row["text"],
            metadata=row["metadata"],
            excluded_embed_metadata_keys=list(row["metadata"]),
        )
        for row in ROWS
    ]
    own = FairFaissVectorStore(embed_model=embed_model, gpu=False)
    VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=own), embed_model=embed_model)
    assert loaded.multivector and own.multivector
    for query in QUERIES:
        vector = embed_model.get_query_embedding(query)
        found = loaded.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=4))
        expected = own.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=4))
        assert found.ids == expected.ids
        assert [node.metadata for node in found.nodes] == [node.metadata for node in expected.nodes]
        np.testing.assert_allclose(found.similarities, expected.similarities, rtol=1e-5, atol=1e-6)
    sparse = loaded.query(VectorStoreQuery(query_str="granite quarry", similarity_top_k=2, mode="sparse"))
    assert sparse.ids and all("granite" in node.get_content() for node in sparse.nodes)


def _search(folder: Path, *flags: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["search", str(folder), "--json", "--gpu", "off", *flags]) == 0
    return json.loads(capsys.readouterr().out)["results"]  # type: ignore[no-any-return]


def test_search_reads_a_store_folder_in_every_mode(built: Path, tiny: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = load_store_folder(built, gpu=False, embedder=_embedder(tiny))
    for query in QUERIES:
        results = _search(built, "--query", query, "-k", "3", capsys=capsys)
        hits = store.search_text(query, 3)
        assert [r["id"] for r in results] == [hit.record.key for hit in hits]
        assert [r["best_window"] for r in results] == [hit.best_window for hit in hits]
        np.testing.assert_allclose([r["score"] for r in results], [hit.score for hit in hits], rtol=1e-5)
        assert results[0]["metadata"] == next(row["metadata"] for row in ROWS if row["id"] == results[0]["id"])
    sparse = _search(built, "--query", "granite quarry", "--mode", "sparse", "-k", "2", capsys=capsys)
    assert sparse and all("granite" in r["text"].lower() for r in sparse)
    hybrid = _search(built, "--query", "granite quarry", "--mode", "hybrid", "-k", "2", capsys=capsys)
    assert len(hybrid) == 2 and all(0.0 <= r["score"] <= 1.0 for r in hybrid)
    capsys.readouterr()
    assert main(["search", str(built), "--query", "x", "--pooling", "cls", "--gpu", "off"]) == 2
    assert "was built by another embed" in capsys.readouterr().err


def test_pooled_and_own_windows_are_asked_for_by_flags(
    tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps(row) for row in ROWS) + "\n")
    base = ["index", "--model", tiny, "--input", str(source), "--gpu", "off", "--max-length", MAX_LENGTH]
    assert main([*base, "--output", str(tmp_path / "pooled"), "--pooled"]) == 0
    assert main([*base, "--output", str(tmp_path / "false"), "--multivector", "false"]) == 0
    for name in ("pooled", "false"):
        pooled = load_store_folder(tmp_path / name, gpu=False)
        assert not pooled.multivector and len(pooled) == len(ROWS)
    assert main([*base, "--output", str(tmp_path / "own"), "--window-boundaries", "tokens"]) == 0
    own = load_store_folder(tmp_path / "own", gpu=False)
    assert own.multivector and own.windows == StoreWindows()
    capsys.readouterr()
    assert main([*base, "--output", str(tmp_path / "bad"), "--pooled", "--aggregate", "top2"]) == 2
    assert "--aggregate scores a document by its windows" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_an_index_folder_of_earlier_releases_still_searches_and_is_replaced_whole(
    tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps(row) for row in ROWS) + "\n")
    output = tmp_path / "out"
    base = ["index", "--model", tiny, "--input", str(source), "--output", str(output), "--gpu", "off"]
    assert main([*base, "--output-format", "index"]) == 0
    assert sorted(path.name for path in output.iterdir()) == [
        "documents.jsonl",
        "index.faiss",
        "index.json",
        "manifest.json",
    ]
    earlier = _search(output, "--query", QUERIES[0], "-k", "3", capsys=capsys)
    assert len(earlier) == 3 and "best_window" not in earlier[0]  # the earlier folder: pooled, read as before
    capsys.readouterr()
    assert main(["search", "--index", str(output), "--query", QUERIES[0], "-k", "3", "--json", "--gpu", "off"]) == 0
    assert json.loads(capsys.readouterr().out)["results"] == earlier  # the earlier spelling
    assert main(base) == 2
    assert "already holds" in capsys.readouterr().err
    assert main([*base, "--overwrite"]) == 0
    assert sorted(path.name for path in output.iterdir()) == ["index", "store.json"]
    assert len(_search(output, "--query", QUERIES[0], "-k", "3", capsys=capsys)) == 3
    assert main([*base, "--overwrite", "--pooled"]) == 0  # a store replaced by a store
    assert not load_store_folder(output, gpu=False).multivector
    assert main([*base, "--overwrite", "--output-format", "index"]) == 0  # and by an index folder, whole
    assert not is_store_folder(output) and not (output / "index").exists()
    assert _search(output, "--query", QUERIES[0], "-k", "3", capsys=capsys) == earlier


def test_the_folder_format_is_the_one_langchains_store_writes() -> None:
    pytest.importorskip("langchain_fair")
    from langchain_fair.local_folders import STORE_FORMAT

    def written(fmt: Any) -> tuple[Any, ...]:
        return (fmt.name, fmt.version, fmt.records_key, fmt.names_index_folder, fmt.encode, fmt.decode, fmt.text_of)

    assert written(STORE_FORMAT) == written(FOLDER_FORMAT)


def _vector_store(count: int) -> Any:
    store = new_folder_store(None, multivector=False, gpu=False)
    pairs = [(f"text {i}", [1.0, float(i)]) for i in range(count)]
    store.add_document_vectors(pairs, None, [f"d{i}" for i in range(count)])
    return store


def test_a_build_replaces_only_the_store_it_found(tmp_path: Path) -> None:
    assert folder_generation(tmp_path) is None
    save_store_folder(_vector_store(1), tmp_path)
    found = folder_generation(tmp_path)
    save_store_folder(_vector_store(2), tmp_path, replacing=found)  # the store the build found: replaced
    with pytest.raises(StoreConflictError):
        save_store_folder(_vector_store(3), tmp_path, replacing=found)  # another one was saved since
    with pytest.raises(StoreConflictError):
        save_store_folder(_vector_store(3), tmp_path)  # a build that found none never replaces one unseen
    assert len(load_store_folder(tmp_path, gpu=False)) == 2


def test_a_store_that_cannot_be_written_is_one_line_and_the_old_folder_stays(
    built: Path, tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fair_retrieval.cli import cmd_index

    def read_only(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied")

    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps(ROWS[0]) + "\n")
    before = (built / "store.json").read_bytes()
    monkeypatch.setattr(cmd_index, "save_store_folder", read_only)
    command = ["index", "--model", tiny, "--input", str(source), "--output", str(built), "--overwrite", "--gpu", "off"]
    assert main(command) == 2
    assert "cannot write the store there (Permission denied); the folder is unchanged" in capsys.readouterr().err
    assert (built / "store.json").read_bytes() == before


def test_llamaindex_persists_an_opened_folder_into_the_folders_own_store(
    built: Path, tiny: str, tmp_path: Path
) -> None:
    pytest.importorskip("llama_index.vector_stores.fair")
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.embeddings.fair import FairEmbedding
    from llama_index.vector_stores.fair import FairFaissVectorStore

    folder = tmp_path / "copy"
    shutil.copytree(built, folder)
    embed_model = FairEmbedding(embedder=_embedder(tiny))
    opened = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False, embed_model=embed_model)
    opened.delete("d0")  # documents of a store folder are their own source documents
    opened.persist(str(folder / "default__vector_store.json"))
    assert (
        not (folder / "default__vector_store.json").exists() and not (folder / "default__vector_store.index").exists()
    )
    reopened = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False, embed_model=embed_model)
    vector = embed_model.get_query_embedding(QUERIES[0])
    query = VectorStoreQuery(query_embedding=vector, similarity_top_k=len(ROWS))
    assert "d0" not in reopened.query(query).ids
    assert reopened.query(query).ids == opened.query(query).ids
    saved = load_store_folder(folder, gpu=False)  # the folder's one store, as the command line reads it
    assert len(saved) == len(ROWS) - 1 and "d0" not in saved


@pytest.mark.parametrize("name", ["store.json", "index/index.json"])
def test_a_file_this_user_may_not_read_is_named_not_readable_not_damaged(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    import errno
    import os

    from fair_retrieval.jsonio import DamagedFileError
    from fair_retrieval.jsonio import paths as jsonio_paths

    folder = tmp_path / "copy"
    shutil.copytree(built, folder)
    denied = (folder / name).resolve()
    real_open = os.open

    def no_permission(path: Any, *args: Any, **kwargs: Any) -> int:
        if Path(path) == denied:  # as a file of mode 000 for a user other than root
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(jsonio_paths.os, "open", no_permission)
    with pytest.raises(ValueError, match="is not readable") as error:
        load_store_folder(folder, gpu=False)
    assert not isinstance(error.value, DamagedFileError) and "damaged" not in str(error.value)
    assert str(folder / name) in str(error.value) and "read permission" in str(error.value)
