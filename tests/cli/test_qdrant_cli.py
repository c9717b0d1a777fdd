"""`fair-retrieval index --qdrant` and `search --qdrant` (local mode, the real MiniLM): the same results as the store
folder of the same documents, a store folder copied into a collection, and the collection opened from LangChain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_retrieval.cli import main
from tests.ranking import assert_same_ranking

pytest.importorskip("faiss")
pytest.importorskip("qdrant_client")

TEXTS = {
    "volcano.txt": "Volcanoes erupt when magma rises through the crust and escapes as lava, ash and gas.",
    "bread.txt": "To bake bread, mix flour, water, yeast and salt, knead the dough, let it rise, then bake it.",
    "penguin.txt": "Penguins are flightless seabirds that live almost only in the Southern Hemisphere.",
    "log.txt": " ".join(f"Day {day}: the lighthouse lamp was trimmed and the fog bell tested." for day in range(40)),
}
QUESTION = "Which seabirds cannot fly?"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, minilm: str) -> Path:
    root = tmp_path_factory.mktemp("qdrant-cli")
    docs = root / "docs"
    docs.mkdir()
    for name, text in TEXTS.items():
        (docs / name).write_text(text, encoding="utf-8")
    assert main(["index", "--model", minilm, "--input", str(docs), "--output", str(root / "store")]) == 0
    qdrant = ["--qdrant", str(root / "qdrant"), "--collection", "docs"]
    assert main(["index", "--model", minilm, "--input", str(docs), *qdrant]) == 0
    return root


def results(capsys: pytest.CaptureFixture[str], *args: str) -> list[tuple[str, float, dict | None]]:
    capsys.readouterr()
    assert main(["search", *args, "--query", QUESTION, "-k", "4", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["results"]
    return [(r["id"], r["score"], r.get("best_window")) for r in found]


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_a_collection_answers_as_the_store_folder(built: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    folder = results(capsys, str(built / "store"), "--mode", mode)
    collection = results(capsys, "--qdrant", str(built / "qdrant"), "--collection", "docs", "--mode", mode)
    assert_same_ranking(collection, folder)
    assert len(folder) >= 1
    if mode == "dense":
        assert folder[0][0] == "penguin.txt"


def test_a_search_that_names_no_mode_answers_hybrid_unless_the_store_chose_another(
    built: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from fair_retrieval.stores import SearchSettings
    from fair_retrieval.stores.store_folder import load_store_folder, save_store_folder

    collection = ["--qdrant", str(built / "qdrant"), "--collection", "docs"]
    for where in ([str(built / "store")], collection):
        assert results(capsys, *where) == results(capsys, *where, "--mode", "hybrid")
        assert results(capsys, *where, "--mode", "dense") != results(capsys, *where)
    store = load_store_folder(built / "store", gpu=False)
    store.search_settings = SearchSettings(mode="dense")  # a store that chose dense records it
    save_store_folder(store, tmp_path / "dense")
    chose_dense = str(tmp_path / "dense")
    assert results(capsys, chose_dense) == results(capsys, str(built / "store"), "--mode", "dense")
    assert results(capsys, chose_dense, "--mode", "hybrid") == results(capsys, str(built / "store"))


def test_a_store_folder_is_copied_into_a_collection(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where = ["--qdrant", str(built / "copied"), "--collection", "copy"]
    assert main(["index", "--input", str(built / "store"), *where]) == 0
    out = capsys.readouterr().out
    from fair_retrieval.stores.store_folder import load_store_folder

    windows = load_store_folder(built / "store", gpu=False).index.window_count
    assert "Copied 4 documents" in out and f"{windows} window vectors, {windows / 4:.1f} a document" in out
    assert_same_ranking(results(capsys, *where), results(capsys, str(built / "store")))


def test_one_collection_opens_in_every_surface_with_the_same_results(
    built: Path, minilm: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Written by the command line, it opens in LangChain and LlamaIndex; written by LlamaIndex, in LangChain and the
    command line: the same documents, texts, metadata and first hit."""
    from langchain_fair import FairEmbeddings, FairQdrantVectorStore
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    from llama_index.embeddings.fair import FairEmbedding
    from llama_index.vector_stores.fair import FairQdrantVectorStore as LlamaQdrant
    from qdrant_client import QdrantClient

    embed_model = FairEmbedding(model_name=minilm)
    client = QdrantClient(path=str(built / "qdrant"))
    try:
        store = FairQdrantVectorStore(client, "docs", FairEmbeddings(model=minilm), allow_embedder_mismatch=True)
        assert sorted(store.ids) == sorted(TEXTS) and store.similarity_search(QUESTION, k=1)[0].id == "penguin.txt"
        nodes = LlamaQdrant(client, "docs", embed_model=embed_model, allow_embedder_mismatch=True)
        index = VectorStoreIndex.from_vector_store(nodes, embed_model=embed_model)
        hit = index.as_retriever(similarity_top_k=1).retrieve(QUESTION)[0]
        assert hit.node.node_id == "penguin.txt" and hit.node.text == store.get_by_ids(["penguin.txt"])[0].page_content

        node = TextNode(id_="note", text="Emperor penguins huddle through the polar winter.", metadata={"kind": "note"})
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="field-notes")
        written = LlamaQdrant(client, "notes", embed_model=embed_model)
        context = StorageContext.from_defaults(vector_store=written)
        VectorStoreIndex([node], storage_context=context, embed_model=embed_model)
        read = FairQdrantVectorStore(client, "notes", FairEmbeddings(model=minilm), allow_embedder_mismatch=True)
        (document,) = read.get_by_ids(["note"])
        assert (document.page_content, document.metadata) == (node.text, {"kind": "note"})
        again = LlamaQdrant(client, "notes", embed_model=embed_model)
        (found,) = VectorStoreIndex.from_vector_store(again, embed_model=embed_model).as_retriever().retrieve("penguin")
        assert found.node.ref_doc_id == "field-notes" and found.node.metadata["kind"] == "note"
    finally:
        client.close()
    assert main(["search", "--qdrant", str(built / "qdrant"), "--collection", "notes", "--query", "penguins"]) == 0
    assert "Emperor penguins huddle" in capsys.readouterr().out


def test_bad_qdrant_arguments_fail_before_any_work(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = str(built / "docs")
    assert main(["index", "--input", docs, "--qdrant", str(built / "q2")]) == 2
    assert "--collection NAME" in capsys.readouterr().err
    assert main(["index", "--input", docs, "--qdrant", str(built / "q2"), "--collection", "x", "--output", "o"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["index", "--input", str(built / "store"), "--qdrant", str(built / "q2"), "--collection", "x",
                 "--engine", "ray", "--shards", str(built / "shards")]) == 2  # fmt: skip
    assert "store folder, copied with its windows and no model run: drop --engine ray" in capsys.readouterr().err
    assert main(["search", "--qdrant", str(built / "qdrant"), "--collection", "nope", "--query", "x"]) == 2
    assert "no collection 'nope'" in capsys.readouterr().err


def test_qdrant_places_that_would_keep_nothing_or_write_among_other_files_are_refused(
    built: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = str(built / "docs")
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    cases = {
        ":memory:": "keeps nothing once the command ends",
        str(tmp_path / "a-file"): "that is a file",
        str(built / "store"): "holds other files than a local-mode Qdrant's",  # a FAISS store folder
        docs: "holds other files than a local-mode Qdrant's",  # the input itself
    }
    for where, message in cases.items():
        before = sorted(path.name for path in Path(where).iterdir()) if Path(where).is_dir() else None
        assert main(["index", "--input", docs, "--qdrant", where, "--collection", "x"]) == 2
        assert message in capsys.readouterr().err
        if before is not None:
            assert sorted(path.name for path in Path(where).iterdir()) == before  # nothing written there


def test_a_score_threshold_beyond_floats_is_a_clear_error() -> None:
    from fair_retrieval.stores import DocumentStore

    with pytest.raises(ValueError, match="beyond a float's range"):
        DocumentStore.check_score_threshold(10**400)
