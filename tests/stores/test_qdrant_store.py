"""QdrantStore: the stores' door over a Qdrant collection (local mode, no server), held against the FAISS store.

Every search of both stores runs on the same documents with the same tiny model (a 32-token window, so most texts
are several windows); the Qdrant store must return the same documents in the same order with the same scores, dense,
sparse and hybrid, filtered or not, and keep its documents whole through rewrites, failures and reopening.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from fair_retrieval import FairEmbedder
from fair_retrieval.stores import DocumentStore, QdrantStore, TextDocument
from fair_retrieval.stores.qdrant_collection import DENSE_VECTOR, DOC_FIELD, SETTINGS_KEY
from fair_retrieval.stores.search_modes import SearchSettings
from fair_retrieval.stores.text_documents import document_text, text_document_format
from tests.ranking import assert_same_ranking

pytest.importorskip("faiss")
qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient, models  # noqa: E402

SENTENCES = [
    "The ferry to the island leaves the harbour at nine every morning.",
    "The bakery on the corner opens at six and sells rye bread.",
    "Board games are played at the library on Thursday evenings.",
    "Trains to the city run every hour from the north platform.",
    "The museum shows old maps of the coast in its east wing.",
    "A farmers market fills the square with cheese and apples on Saturdays.",
    "The swimming pool closes for cleaning during the first week of August.",
    "Volunteers repair bicycles for free behind the town hall.",
]
QUERIES = ["When does the ferry leave?", "bread and cheese", "Where are bicycles repaired?", "maps of the coast"]
FILTERS = ({"group": 1}, {"n": {"$gte": 5}, "lang": "en"}, {"$or": [{"group": 0}, {"tags": {"$contains": "b"}}]})
FORMAT = text_document_format("QdrantStore", "the tests", "fair-retrieval")
DENSE = SearchSettings(mode="dense")


def corpus() -> tuple[list[str], list[dict[str, Any]], list[str]]:
    texts = [" ".join(f"{i}.{j}: {SENTENCES[(i + j) % len(SENTENCES)]}" for j in range(1 + i % 5)) for i in range(12)]
    metadatas = [
        {"group": i % 3, "n": i, "lang": "en" if i % 2 else "de", "tags": ["a", "b"][: i % 3]} for i in range(12)
    ]
    return texts, metadatas, [f"doc-{i}" for i in range(12)]


@pytest.fixture(scope="module")
def tiny(tiny_models: dict[str, str]) -> FairEmbedder:
    return FairEmbedder(tiny_models["bert-mean"], max_length=32, device="cpu")


def faiss_store(embedder: Any, **options: Any) -> DocumentStore[TextDocument]:
    return DocumentStore.of_texts(gpu=False, kind="flat", embedder=embedder, **options)


def qdrant_store(embedder: Any, client: Any = None, name: str = "docs", **options: Any) -> QdrantStore[TextDocument]:
    return QdrantStore(
        client=client or QdrantClient(":memory:"),
        collection_name=name,
        fmt=FORMAT,
        embedder=embedder,
        text_of=document_text,
        **options,
    )


def filled(store: DocumentStore[TextDocument]) -> DocumentStore[TextDocument]:
    texts, metadatas, ids = corpus()
    store.add_documents(texts, metadatas, ids)
    return store


def ranked(hits: list[Any]) -> list[tuple[str, float, Any]]:
    """The hits as (key, score, best window) rows, for `assert_same_ranking` (ties and last-bit rounding may
    differ)."""
    return [(hit.record.key, hit.score, hit.best_window) for hit in hits]


@pytest.mark.parametrize("multivector", [True, False])
@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_every_query_mode_ranks_as_the_faiss_store(tiny: FairEmbedder, multivector: bool, metric: str) -> None:
    faiss = filled(faiss_store(tiny, multivector=multivector, metric=metric))
    qdrant = filled(qdrant_store(tiny, multivector=multivector, metric=metric))
    assert len(qdrant) == len(faiss) == 12
    for query in QUERIES:
        for mode in ("dense", "sparse", "hybrid"):
            settings = faiss.call_settings(mode=mode)
            expected = faiss.search_text(query, 5, settings=settings)
            got = qdrant.search_text(query, 5, settings=settings)
            assert_same_ranking(ranked(got), ranked(expected))  # the same windows found each hit
        for spec in (
            {"group": 1},
            {"n": {"$gte": 5}, "lang": "en"},
            {"$or": [{"group": 0}, {"tags": {"$contains": "b"}}]},
        ):
            assert_same_ranking(ranked(qdrant.search_text(query, 3, spec)), ranked(faiss.search_text(query, 3, spec)))


def test_mmr_and_vectors_follow_the_faiss_store(tiny: FairEmbedder) -> None:
    faiss, qdrant = filled(faiss_store(tiny)), filled(qdrant_store(tiny))
    query = tiny.embed_query(QUERIES[0])
    assert_same_ranking(ranked(qdrant.mmr_search(query, 3, 8, 0.5)), ranked(faiss.mmr_search(query, 3, 8, 0.5)))
    int_f = [i for i, _ in faiss.get(["doc-3", "doc-7"])]
    int_q = [i for i, _ in qdrant.get(["doc-3", "doc-7"])]
    np.testing.assert_allclose(qdrant.vectors(int_q), faiss.vectors(int_f), atol=1e-5)


def test_gets_deletes_groups_and_order(tiny: FairEmbedder) -> None:
    store = filled(qdrant_store(tiny, group_of=lambda record: str(record.metadata["group"])))
    assert store.records.keys == corpus()[2]
    assert [record.key for _, record in store.get(["doc-4", "nope", "doc-1", "doc-4"])] == ["doc-4", "doc-1"]
    assert "doc-4" in store and "nope" not in store
    assert store.delete(["doc-4", "nope"]) == ["nope"]
    assert "doc-4" not in store and len(store) == 11
    with pytest.raises(ValueError, match="not in the store"):
        store.delete(["nope"], strict=True)
    assert store.delete_group("1") == 3  # doc-1, doc-7 and doc-10 (doc-4 is gone)
    assert {record.key for _, record in store.get(corpus()[2])}.isdisjoint({"doc-1", "doc-7", "doc-10"})
    selected = store.selection(groups=["2"])
    assert [store.records_of([i])[0].key for i in store.ordered(selected)] == ["doc-2", "doc-5", "doc-8", "doc-11"]
    store.clear()
    assert len(store) == 0 and store.search(tiny.embed_query("ferry"), 3) == []


def test_a_rewrite_replaces_every_window_and_keeps_nothing_stale(tiny: FairEmbedder) -> None:
    store = filled(qdrant_store(tiny))
    collection = store.collection
    windows = models.Filter(must=[models.FieldCondition(key=DOC_FIELD, match=models.MatchValue(value="doc-4"))])
    before = len(list(collection.scroll(windows)))
    store.add_documents(["A short text about ferries."], [{"n": 100}], ["doc-4"])
    points = list(collection.scroll(windows))
    assert before > 3 and len(points) == 2  # its head and its one window
    hit = store.search_text("ferries", 1, {"n": 100})[0]
    assert hit.record.text == "A short text about ferries." and hit.best_window == {"start": 0, "end": 27, "window": 0}


def test_a_failed_write_leaves_the_previous_version_whole(tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    store = filled(qdrant_store(tiny))
    expected = ranked(store.search_text(QUERIES[0], 12))
    collection = store.collection
    original = collection._upsert
    calls = []

    def heads_fail(points: list[Any], only_over: Any = None, sizes: Any = None) -> None:
        calls.append(len(points))
        if len(calls) == 2:  # the windows landed, the heads do not
            raise RuntimeError("connection reset by peer")
        original(points, only_over, sizes)

    monkeypatch.setattr(collection, "_upsert", heads_fail)
    with pytest.raises(ValueError, match=r"1 of these 1 documents did not land .*\('doc-0'\)"):
        store.add_documents(["A new text about the ferry at nine."], None, ["doc-0"])
    monkeypatch.setattr(collection, "_upsert", original)
    assert_same_ranking(
        ranked(store.search_text(QUERIES[0], 12)), expected
    )  # the new windows are not the head's: unseen
    assert store.get(["doc-0"])[0][1].text == corpus()[0][0]
    store.add_documents(["A new text about the ferry at nine."], None, ["doc-0"])  # added again: whole, nothing stale
    assert store.get(["doc-0"])[0][1].text == "A new text about the ferry at nine."
    assert "doc-0" in [hit.record.key for hit in store.search_text(QUERIES[0], 12)]
    doc = models.Filter(must=[models.FieldCondition(key=DOC_FIELD, match=models.MatchValue(value="doc-0"))])
    assert len(list(collection.scroll(doc))) == 2


def test_a_dropped_connection_is_tried_again(tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    store = filled(qdrant_store(tiny))
    client = store.collection.client
    real = client.query_points_groups
    failures = iter([httpx.ConnectError("refused")])

    def flaky(*args: Any, **kwargs: Any) -> Any:
        for error in failures:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr("fair_retrieval.stores.qdrant_collection.time.sleep", lambda seconds: None)
    monkeypatch.setattr(client, "query_points_groups", flaky)
    assert len(store.search(tiny.embed_query("ferry"), 3)) == 3


def test_a_reopened_collection_keeps_its_settings_and_checks_the_embedder(
    tiny: FairEmbedder, tiny_models: dict[str, str], tmp_path: Any
) -> None:
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    store = filled(qdrant_store(tiny, client, search={"mode": "hybrid", "alpha": 0.5}))
    expected = ranked(store.search_text(QUERIES[1], 4))
    client.close()
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    reopened = qdrant_store(tiny, client)
    assert len(reopened) == 12 and reopened.multivector and reopened.windows == store.windows
    assert reopened.search_settings.mode == "hybrid" and reopened.search_settings.alpha == 0.5
    assert_same_ranking(ranked(reopened.search_text(QUERIES[1], 4)), expected)
    with pytest.raises(ValueError, match="metric='cosine', but metric='l2' was asked"):
        qdrant_store(tiny, client, metric="l2")
    other = FairEmbedder(tiny_models["bert-cls"], max_length=32, device="cpu")
    with pytest.raises(ValueError, match="allow_embedder_mismatch=True"):
        qdrant_store(other, client)
    assert len(qdrant_store(other, client, allow_embedder_mismatch=True)) == 12


def test_collections_not_made_by_a_store_are_refused(tiny: FairEmbedder) -> None:
    client = QdrantClient(":memory:")
    client.create_collection("plain", vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE))
    with pytest.raises(ValueError, match="was not made by a fair-retrieval store"):
        qdrant_store(tiny, client, "plain")
    filled(qdrant_store(tiny, client, "made"))
    info = client.get_collection("made")
    record = dict(info.config.metadata[SETTINGS_KEY])
    client.delete_collection("made")
    client.create_collection(
        "made",
        vectors_config={DENSE_VECTOR: models.VectorParams(size=7, distance=models.Distance.DOT)},
        sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        metadata={SETTINGS_KEY: record},
    )
    with pytest.raises(ValueError, match="holds 7-d vectors but its record says"):
        qdrant_store(tiny, client, "made")


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ({"metric": "l2"}, "'distance' is 'Dot', not 'Euclid', the distance of its metric 'l2'"),
        ({"metric": "hamming"}, "'metric' is 'hamming', not one of cosine, ip, l2"),
        ({"avgdl": -1.0}, "'avgdl' is -1.0, not null or a positive number"),
        ({"avgdl": "long"}, "'avgdl' is 'long'"),
        ({"multivector": "yes"}, "'multivector' is 'yes', not True or False"),
        ({"filter_markers": 1}, "'filter_markers' is 1, not True or False"),
        ({"windows": {"tokens": "many"}}, "'windows' is {'tokens': 'many'}"),
        ({"windows": {"tokens": [64], "boundaries": "nowhere"}}, "not a window shape a store writes"),
        ({"windows": [64]}, "'windows' is [64]"),
        ({"lexical": 5}, "'lexical' is 5, not a mapping or null"),
        ({"identity": ["model"]}, "'identity' is ['model']"),
        ({"records": 3}, "'records' is 3, not a format name"),
        ({"dim": True}, "'dim' is True, not a positive int"),
    ],
)
def test_a_hand_edited_collection_record_is_refused_by_name(
    tiny: FairEmbedder, edit: dict[str, Any], named: str
) -> None:
    client = QdrantClient(":memory:")
    filled(qdrant_store(tiny, client, "edited"))
    record = {**client.get_collection("edited").config.metadata[SETTINGS_KEY], **edit}
    client.update_collection("edited", metadata={SETTINGS_KEY: record})
    with pytest.raises(ValueError, match="edited by hand or damaged") as refused:
        qdrant_store(tiny, client, "edited")
    assert named in str(refused.value)


def test_a_record_of_the_embedders_own_windows_opens(tiny: FairEmbedder) -> None:
    """{"tokens": [], "boundaries": None} is what a store of the embedder's own windows records: not an edit."""
    from fair_retrieval.stores.store_mode import StoreWindows

    client = QdrantClient(":memory:")
    filled(qdrant_store(tiny, client, "own", multivector=True, windows=StoreWindows()))
    assert client.get_collection("own").config.metadata[SETTINGS_KEY]["windows"] == {"tokens": [], "boundaries": None}
    assert len(qdrant_store(tiny, client, "own")) == 12


def test_bad_arguments_are_refused_before_any_work(tiny: FairEmbedder) -> None:
    with pytest.raises(TypeError, match="takes no FAISS option \\(kind\\)"):
        qdrant_store(tiny, kind="hnsw")
    with pytest.raises(TypeError, match=r"must be a qdrant_client\.QdrantClient"):
        QdrantStore(client="http://localhost:6333", collection_name="x", fmt=FORMAT, embedder=tiny)
    with pytest.raises(ValueError, match="aggregate='max'"):
        qdrant_store(tiny, aggregate="top2")
    from fair_retrieval.lexical import LexicalSettings

    with pytest.raises(ValueError, match="Lucene's variant only"):
        qdrant_store(tiny, lexical=LexicalSettings(method="bm25+"))
    store = filled(qdrant_store(tiny))
    with pytest.raises(ValueError, match="cannot run a Python function"):
        store.search_text("ferry", 3, lambda metadata: True)
    with pytest.raises(ValueError, match="query embedding gave 5-d vectors"):
        store.search(np.ones(5), 3)


def test_copy_from_a_faiss_store_gives_the_same_results(tiny: FairEmbedder) -> None:
    faiss = filled(faiss_store(tiny))
    qdrant = qdrant_store(tiny)
    assert qdrant.copy_from(faiss, batch=5) == 12  # in batches: BM25's average length is still all documents'
    for query in QUERIES:
        for mode in ("dense", "sparse", "hybrid"):
            settings = faiss.call_settings(mode=mode)
            assert_same_ranking(
                ranked(qdrant.search_text(query, 4, settings=settings)),
                ranked(faiss.search_text(query, 4, settings=settings)),
            )


@pytest.mark.skipif(not os.environ.get("QDRANT_URL"), reason="no Qdrant server: set QDRANT_URL to run against one")
def test_against_a_server(tiny: FairEmbedder) -> None:
    client = QdrantClient(url=os.environ["QDRANT_URL"])
    name = f"fair-retrieval-test-{os.getpid()}"
    try:
        faiss, qdrant = filled(faiss_store(tiny)), filled(qdrant_store(tiny, client, name))
        for mode in ("dense", "sparse", "hybrid"):
            settings = faiss.call_settings(mode=mode)
            assert_same_ranking(
                ranked(qdrant.search_text(QUERIES[0], 5, settings=settings)),
                ranked(faiss.search_text(QUERIES[0], 5, settings=settings)),
            )
    finally:
        client.delete_collection(name)


WRITER = """
import sys
from qdrant_client import QdrantClient
from fair_retrieval import FairEmbedder
from fair_retrieval.stores import QdrantStore
from fair_retrieval.stores.text_documents import document_text, text_document_format

model, path = sys.argv[1], sys.argv[2]
client = QdrantClient(path=path)
store = QdrantStore(
    client=client,
    collection_name="docs",
    fmt=text_document_format("QdrantStore", "the tests", "fair-retrieval"),
    embedder=FairEmbedder(model, max_length=32, device="cpu"),
    text_of=document_text,
)
texts = [f"{i}: the ferry leaves at {i} from pier {i % 3}." for i in range(6)]
store.add_documents(texts, [{"writer": "first"}] * 6, [f"first-{i}" for i in range(6)])
print("written", flush=True)
sys.stdin.readline()  # holds the folder until told to close it
client.close()
"""


def test_two_processes_write_one_local_collection_in_turn(
    tiny: FairEmbedder, tiny_models: dict[str, str], tmp_path: Any
) -> None:
    """Local mode serves one client at a time: a second process is refused by name while the first holds the folder,
    then writes after it closes, and a third client sees both processes' documents."""
    import subprocess
    import sys

    from fair_retrieval.stores.qdrant_store import client_at

    folder = str(tmp_path / "qdrant")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, tiny_models["bert-mean"], folder],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "written"
        with pytest.raises(ValueError, match=r"open in another client .* run a Qdrant server"):
            client_at(folder)
    finally:
        writer.communicate("close\n", timeout=60)
    assert writer.returncode == 0
    client = client_at(folder)
    second = qdrant_store(tiny, client)
    texts, metadatas, ids = corpus()
    second.add_documents(texts, metadatas, ids)
    client.close()
    client = client_at(folder)
    reader = qdrant_store(tiny, client)
    assert len(reader) == 18
    first = [f"first-{i}" for i in range(6)]
    assert {record.key for _, record in reader.get(first)} == set(first)
    reference = filled(faiss_store(tiny))
    reference.add_documents(
        [f"{i}: the ferry leaves at {i} from pier {i % 3}." for i in range(6)],
        [{"writer": "first"}] * 6,
        [f"first-{i}" for i in range(6)],
    )
    dense = reference.call_settings(mode="dense")  # BM25's average length is the first writer's batch's there
    for query in QUERIES:  # the same hits, exact ties in either order
        got = reader.search_text(query, 5, settings=dense)
        assert_same_ranking(ranked(got), ranked(reference.search_text(query, 5, settings=dense)))
    client.close()


def test_a_new_collection_gets_the_measured_defaults_unless_told_otherwise(
    tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HNSW m 32 / ef_construct 256, int8 codes in RAM and the floats on disk for a new collection (each option
    overridable); on a server every dense search asks for a beam of 1,024 with the codes re-scored, in local mode
    (exact) for nothing, so Qdrant warns of nothing."""
    import warnings

    from fair_retrieval.stores.qdrant_collection import QdrantCollection

    client = QdrantClient(":memory:")
    created: list[dict[str, Any]] = []
    create = client.create_collection
    monkeypatch.setattr(client, "create_collection", lambda *a, **k: created.append(k) or create(*a, **k))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # local mode warns of any search_params
        store = filled(qdrant_store(tiny, client))
        assert store.search_text(QUERIES[0], 3)
    options = created[0]
    assert (options["hnsw_config"].m, options["hnsw_config"].ef_construct) == (32, 256)
    scalar = options["quantization_config"].scalar
    assert (scalar.type, scalar.always_ram) == (models.ScalarType.INT8, True)
    assert options["vectors_config"][DENSE_VECTOR].on_disk is True
    filled(qdrant_store(tiny, client, name="plain", collection_options={"quantization_config": None, "on_disk": False}))
    assert created[1]["quantization_config"] is None and created[1]["vectors_config"][DENSE_VECTOR].on_disk is False
    assert created[1]["hnsw_config"].m == 32

    asked: list[Any] = []
    groups = client.query_points_groups
    monkeypatch.setattr(client, "query_points_groups", lambda *a, **k: asked.append(k) or groups(*a, **k))
    monkeypatch.setattr(QdrantCollection, "_local", property(lambda self: False))  # as on a server
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # local mode underneath says the params do nothing
        store.search_text(QUERIES[0], 3)
        given = models.SearchParams(exact=True)
        qdrant_store(tiny, client, search_params=given).search_text(QUERIES[0], 3)
    params = asked[0]["search_params"]
    assert params.hnsw_ef == 1024 and params.quantization.rescore and params.quantization.oversampling == 2.0
    assert asked[1]["search_params"] is given


def _window_points(store: QdrantStore[TextDocument], key: str) -> list[Any]:
    doc = models.Filter(
        must=[
            models.FieldCondition(key=DOC_FIELD, match=models.MatchValue(value=key)),
            models.FieldCondition(key="fr_kind", match=models.MatchValue(value="window")),
        ]
    )
    return list(store.collection.scroll(doc))


@pytest.mark.parametrize("paused", ["older, after its windows", "newer, after reading the heads"])
def test_two_writers_of_one_document_leave_the_newer_whole(
    tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch, paused: str
) -> None:
    """Two writers (two stores on one collection, as two clients of a server) upsert doc-3: one is paused in its
    write while the other writes in full, in an order two processes can produce (their stamps set as clocks may)."""
    from fair_retrieval.stores import qdrant_collection

    client = QdrantClient(":memory:")
    waiting, other = filled(qdrant_store(tiny, client)), qdrant_store(tiny, client)
    texts = {"waiting": "The waiting writer says the ferry leaves at ten.", "other": "The other one: the bus at noon."}
    now = qdrant_collection.next_stamp()
    newer_waits = paused.startswith("newer")
    stamps = iter([now + 2000, now + 1000] if newer_waits else [now + 1000, now + 2000])
    monkeypatch.setattr(qdrant_collection, "next_stamp", lambda: next(stamps))  # the waiting writer stamps first

    def the_other_writes() -> None:
        other.add_documents([texts["other"]], [{"by": "other"}], ["doc-3"])

    collection = waiting.collection
    if newer_waits:
        read = collection.heads_of
        calls = []

        def heads_of(keys: Any, **options: Any) -> Any:
            found = read(keys, **options)
            calls.append(1)
            if len(calls) == 1:  # right after its first read of the heads
                the_other_writes()
            return found

        monkeypatch.setattr(collection, "heads_of", heads_of)
    else:
        upsert = collection._upsert

        def heads_after_the_other(points: list[Any], only_over: Any = None, sizes: Any = None) -> None:
            if only_over is not None:  # its windows are in; the other writes before its heads
                the_other_writes()
            upsert(points, only_over, sizes)

        monkeypatch.setattr(collection, "_upsert", heads_after_the_other)
    waiting.add_documents([texts["waiting"]], [{"by": "waiting"}], ["doc-3"])
    monkeypatch.undo()
    winner = texts["waiting" if newer_waits else "other"]
    for store in (waiting, other):
        assert len(store) == 12 and store.get(["doc-3"])[0][1].text == winner  # the newer write, whole
        for text in texts.values():  # also where the loser's windows would rank first
            hits = store.search_text(text, 12, settings=DENSE)
            assert len(hits) == 12 and [hit.record.key for hit in hits].count("doc-3") == 1
    version = waiting.collection.heads_of(["doc-3"])["doc-3"]["fr_version"]
    assert {point.payload["fr_version"] for point in _window_points(waiting, "doc-3")} == {version}  # none left


def kill_before_heads(collection: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make `collection`'s writes die as a killed process would, after their windows and before their heads
    (nothing cleans up after them); the real upsert is returned."""
    original = collection._upsert

    def killed(points: list[Any], only_over: Any = None, sizes: Any = None) -> None:
        if only_over is not None:
            raise RuntimeError("killed")
        original(points, only_over, sizes)

    monkeypatch.setattr(collection, "_forget", lambda ids: None)
    monkeypatch.setattr(collection, "_upsert", killed)
    return original


def test_windows_of_killed_writes_never_take_a_documents_place(
    tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write killed after its windows (no head: a new document, or a document's next version) leaves windows no
    head counts; every search still returns k documents, each by a window its head counts."""
    store = filled(qdrant_store(tiny))
    expected = {k: ranked(store.search_text(QUERIES[0], k, settings=DENSE)) for k in (1, 4, 10)}
    collection = store.collection
    original = kill_before_heads(collection, monkeypatch)
    copies = [QUERIES[0] + f" Copy {i}." for i in range(12)]  # windows that would outrank every document
    with pytest.raises(ValueError, match="did not land"):
        store.add_documents(copies, None, [f"ghost-{i}" for i in range(12)])
    with pytest.raises(ValueError, match="did not land"):
        store.add_documents(copies[:6], None, [f"doc-{i}" for i in range(6)])
    monkeypatch.setattr(collection, "_upsert", original)
    assert len(_window_points(store, "ghost-0")) >= 1 and len(store) == 12
    for k in (1, 4, 10):
        assert_same_ranking(ranked(store.search_text(QUERIES[0], k, settings=DENSE)), expected[k])
    store.add_documents(["The ferry now leaves at eight."], None, ["doc-0"])  # doc-0's next write lands
    assert len(_window_points(store, "doc-0")) > 1  # its killed write's windows are still there, now older
    store.search_text(copies[0], 12, settings=DENSE)  # a search that meets them deletes them
    head = collection.heads_of(["doc-0"])["doc-0"]
    assert all(point.payload["fr_version"] == head["fr_version"] for point in _window_points(store, "doc-0"))


def test_a_delete_removes_every_point_of_its_documents_by_id_also_for_an_earlier_releases_heads(
    tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fair_retrieval.stores.qdrant_collection import COUNT_FIELD, HEAD, point_id

    made = QdrantStore._settings_record
    monkeypatch.setattr(  # a collection of an earlier release: heads named by their keys, not their int ids
        QdrantStore, "_settings_record", lambda self: {k: v for k, v in made(self).items() if k != "head_ids"}
    )
    store = filled(qdrant_store(tiny))
    assert not store.collection.int_head_ids
    store.collection.client.delete_payload(
        store.collection.name, keys=[COUNT_FIELD], points=[point_id("doc-5", HEAD)]
    )  # written by an earlier release: the head does not count its windows
    assert len(_window_points(store, "doc-4")) > 1 and len(_window_points(store, "doc-5")) > 1
    assert store.delete(["doc-4", "doc-5", "nope"]) == ["nope"]
    for key in ("doc-4", "doc-5"):
        doc = models.Filter(must=[models.FieldCondition(key=DOC_FIELD, match=models.MatchValue(value=key))])
        assert list(store.collection.scroll(doc)) == []
    assert len(store) == 10 and store.get(["doc-4", "doc-6"])[0][1].key == "doc-6"
    with pytest.raises(ValueError, match="not in the store"):
        store.delete(["doc-6", "nope"], strict=True)
    assert len(store) == 10


def test_a_write_that_fails_midway_says_which_documents_landed_and_leaves_those_whole(
    tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = filled(qdrant_store(tiny, batch_size=2))
    collection = store.collection
    original, calls = collection._upsert, []

    def second_heads_batch_fails(points: list[Any], only_over: Any = None, sizes: Any = None) -> None:
        if only_over is None:
            return original(points, only_over, sizes)
        for start in range(0, len(points), 2):  # the heads go in batches of 2: the second one is lost
            calls.append(start)
            if len(calls) == 2:
                raise RuntimeError("connection reset by peer")
            original(points[start : start + 2], only_over)
        return None

    monkeypatch.setattr(collection, "_upsert", second_heads_batch_fails)
    texts = [f"A new text {i} about the ferry at nine." for i in range(5)]
    with pytest.raises(ValueError, match=r"3 of these 5 documents did not land .*'doc-2', 'doc-3', 'doc-4'.*2 others"):
        store.add_documents(texts, None, [f"doc-{i}" for i in range(5)])
    monkeypatch.setattr(collection, "_upsert", original)
    assert [record.text for _, record in store.get(["doc-0", "doc-1"])] == texts[:2]  # landed, whole
    assert [record.text for _, record in store.get(["doc-2"])] == [corpus()[0][2]]  # its previous version
    for i in range(5):
        head = collection.heads_of([f"doc-{i}"])[f"doc-{i}"]
        assert {point.payload["fr_version"] for point in _window_points(store, f"doc-{i}")} == {head["fr_version"]}
    hits = store.search_text(texts[0], 12, settings=DENSE)
    assert hits[0].record.key == "doc-0" and len(hits) == 12


def test_a_delete_stopped_after_the_heads_leaves_the_documents_out_of_every_search(
    tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = filled(qdrant_store(tiny))
    collection = store.collection
    original, calls = collection.delete_points, []

    def killed_after_heads(ids: Any) -> None:
        calls.append(len(ids))
        if len(calls) == 2:  # the heads went, the windows do not
            raise RuntimeError("killed")
        original(ids)

    monkeypatch.setattr(collection, "delete_points", killed_after_heads)
    with pytest.raises(RuntimeError, match="killed"):
        store.delete(["doc-0", "doc-1"])
    monkeypatch.undo()
    assert len(_window_points(store, "doc-0")) > 0 and len(store) == 10
    for mode in ("dense", "sparse", "hybrid"):
        hits = store.search_text(QUERIES[0], 12, settings=SearchSettings(mode=mode))
        assert hits and not {hit.record.key for hit in hits} & {"doc-0", "doc-1"}


def test_filters_on_lists_nulls_and_empties_keep_what_the_faiss_store_keeps(
    tiny: FairEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """A list field is a whole value, a null a present value, in both backends (the points' field markers); a
    collection written before the markers keeps Qdrant's reading and says so when it opens."""
    texts, _, ids = corpus()
    kinds: list[dict[str, Any]] = [{"lang": ["en", "de"]}, {"lang": "en"}, {"lang": None}, {"lang": []}, {}]
    metadatas = [{**kinds[i % len(kinds)], "n": i} for i in range(12)]
    faiss, qdrant = faiss_store(tiny), qdrant_store(tiny, name="lists")
    for store in (faiss, qdrant):
        store.add_documents(texts, metadatas, ids)
    for spec in (
        {"lang": "en"},
        {"lang": {"$ne": "en"}},
        {"lang": {"$nin": ["en", "fr"]}},
        {"lang": None},
        {"lang": {"$exists": True}},
        {"lang": []},
        {"lang": ["en", "de"]},
        {"lang": {"$contains": "en"}},
        {"lang": {"$all": []}},
    ):
        for mode in ("dense", "sparse", "hybrid"):
            settings = faiss.call_settings(mode=mode)
            expected = faiss.search_text(QUERIES[0], 12, spec, settings=settings)
            got = qdrant.search_text(QUERIES[0], 12, spec, settings=settings)
            assert sorted(hit.record.key for hit in got) == sorted(hit.record.key for hit in expected), (spec, mode)
    # an earlier release's collection: no markers on its points, none in its record
    client = qdrant.collection.client
    info = client.get_collection("lists")
    record = {key: value for key, value in info.config.metadata[SETTINGS_KEY].items() if key != "filter_markers"}
    client.update_collection("lists", metadata={SETTINGS_KEY: record})
    with caplog.at_level("WARNING"):
        earlier = qdrant_store(tiny, client=client, name="lists")
    assert "carry no filter markers" in caplog.text and "new collection" in caplog.text
    found = {hit.record.key for hit in earlier.search_text(QUERIES[0], 12, {"lang": "en"}, settings=DENSE)}
    assert "doc-0" in found  # ["en", "de"]: Qdrant's reading, one element matches (the markers would say no)
    assert "doc-0" not in {hit.record.key for hit in qdrant.search_text(QUERIES[0], 12, {"lang": "en"}, settings=DENSE)}


def test_two_keys_of_one_int_id_are_refused_in_a_write_and_named_when_read(
    tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 63-bit hash collision (simulated): refused before anything is written, within one write and against a
    stored document (heads are named by int id, so the second key meets the first's head)."""
    from fair_retrieval.stores import qdrant_collection, qdrant_store

    real = qdrant_collection.int_id_of

    def colliding(key: str) -> int:
        return real("doc-1") if key in ("doc-1", "clash") else real(key)

    for module in (qdrant_collection, qdrant_store):
        monkeypatch.setattr(module, "int_id_of", colliding)
    store = filled(qdrant_store.QdrantStore(client=QdrantClient(":memory:"), collection_name="c", fmt=FORMAT,
                                            embedder=tiny, text_of=document_text))  # fmt: skip
    with pytest.raises(ValueError, match=r"Documents 'doc-1' and 'clash' have the same int id"):
        store.add_documents(["a clash of ids", "more text"], None, ["doc-1", "clash"])
    assert len(store) == 12 and store.get(["clash"]) == []  # nothing of that write landed
    with pytest.raises(ValueError, match=r"Documents 'doc-1' and 'clash' have the same int id"):  # across writes
        store.add_documents(["a clash of ids"], None, ["clash"])  # its head's id is doc-1's: met before writing
    assert len(store) == 12 and store.get(["clash"]) == [] and len(store.search_text("clash", 12, settings=DENSE)) == 12
    assert store.get(["doc-1"])[0][1].key == "doc-1"  # the stored one, whole


def test_windows_of_a_killed_write_of_a_document_deleted_since_are_removed_once_old(
    tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows with no head at all: a write being made (kept), or, an hour on, a killed write's of a document new
    then or deleted since (deleted by the first search that meets them); no search returns them meanwhile."""
    from fair_retrieval.stores import qdrant_collection
    from fair_retrieval.stores import qdrant_store as module

    store = filled(qdrant_store(tiny))
    collection = store.collection
    kill_before_heads(collection, monkeypatch)
    hour_ago = qdrant_collection.next_stamp() - (module.ORPHAN_SECONDS + 60) * 1_000_000
    monkeypatch.setattr(qdrant_collection, "next_stamp", lambda: hour_ago)
    with pytest.raises(ValueError, match="did not land"):  # doc-3's next write, killed an hour ago
        store.add_documents([QUERIES[0] + " Again."], None, ["doc-3"])
    monkeypatch.undo()
    kill_before_heads(collection, monkeypatch)
    with pytest.raises(ValueError, match="did not land"):  # a new document's write, killed just now (or in flight)
        store.add_documents([QUERIES[0] + " Fresh."], None, ["fresh"])
    monkeypatch.undo()
    assert store.delete(["doc-3"]) == [] and len(store) == 11
    assert len(_window_points(store, "doc-3")) >= 1  # the killed write's windows: no head counts them
    hits = store.search_text(QUERIES[0], 12, settings=DENSE)
    assert len(hits) == 11 and {hit.record.key for hit in hits} == {f"doc-{i}" for i in range(12)} - {"doc-3"}
    assert _window_points(store, "doc-3") == []  # an hour old, with no head: deleted by the search that met them
    assert len(_window_points(store, "fresh")) >= 1  # recent: perhaps a write being made, kept


def test_requests_are_sized_by_bytes_and_a_point_too_large_for_a_server_is_refused_first(
    tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Points go in batches of `batch_size` and of at most MAX_REQUEST_BYTES (a server refuses a request over 32 MiB
    by default); a document whose head alone passes the server's limit is refused before anything is written."""
    from fair_retrieval.stores import qdrant_collection

    store = qdrant_store(tiny, batch_size=256)
    client = store.collection.client
    requests: list[int] = []
    original = client.upsert

    def counted(*args: Any, **kwargs: Any) -> Any:
        requests.append(len(kwargs["points"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(client, "upsert", counted)
    monkeypatch.setattr(qdrant_collection, "MAX_REQUEST_BYTES", 64 * 1024)  # scaled down with the documents
    texts, metadatas, ids = corpus()
    big = [{**metadata, "notes": "x" * 20_000} for metadata in metadatas]  # every point of a document ≥ 20 kB
    store.add_documents(texts, big, ids)
    assert max(requests) <= 3 and sum(requests) > 24  # ≤ 3 points of ≥ 20 kB in 64 kB: windows, then 12 heads
    assert len(store) == 12 and store.get(["doc-5"])[0][1].metadata["notes"] == "x" * 20_000
    requests.clear()
    monkeypatch.setattr(qdrant_collection, "SERVER_REQUEST_BYTES", 100 * 1024)
    with pytest.raises(ValueError, match=r"Document 'huge' is about 0\.2 MiB as a Qdrant point .* Nothing of this"):
        store.add_documents(["small", "huge"], [{}, {"notes": "y" * 200_000}], ["small", "huge"])
    assert requests == [] and store.get(["small", "huge"]) == []
