"""Fuzz tests (hypothesis) over crafted serialized stores and recorded counters, as someone who knows the formats
would craft them (every digest and checksum computed again):

- the bytes of `store_bytes`: random bodies, random byte changes of a real archive, and real archives with one
  member added that is sparse (GNU type, PAX ``GNU.sparse.*`` headers), larger than the archive, oddly named ('',
  '.', '..', nested under a file, repeated, absolute), a link or a device, or cut short;
- every integer field (of a list: its first and last items) of every record a multi-vector store saves
  (`store.json`, `index/windows.json`, `index/index.json`) and of an index folder of `fair-retrieval index`
  (`manifest.json`, `index.json`) set to 0, −1, 2**25, 2**63, 10**30 or 1e308, each one (an exhaustive list).

Whatever was done, reading is refused with a ValueError that names the member or the file and the cause (a
`DamagedFileError` for a record), or gives back exactly the store that was saved (a window's span or weight set in
bounds: as the crafted file says); never another exception, within a
bounded time and a bounded peak of Python allocations (`tracemalloc`). Derandomised and bounded: they run in seconds.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fair_retrieval.jsonio.snapshot import record_crc32  # noqa: E402
from fair_retrieval.stores import TextDocument  # noqa: E402
from fair_retrieval.stores.document_store import DocumentStore  # noqa: E402
from fair_retrieval.stores.store_archive import STORE_BYTES_HEADER, store_bytes, store_from_bytes  # noqa: E402
from fair_retrieval.stores.store_format import load_store, save_store  # noqa: E402
from fair_retrieval.stores.text_documents import text_document_format  # noqa: E402
from tests.stores.test_document_store import WindowEmbedder  # noqa: E402
from tests.test_crafted_folders import bounded, load_cli  # noqa: E402
from tests.test_faults import build_cli_folder  # noqa: E402

pytest.importorskip("faiss")

FUZZ = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
FORMAT = text_document_format("ProbeStore", "ProbeStore.save()", "probe")
PEAK_BYTES = 48 << 20
"""The most a crafted read may allocate (Python and NumPy): a table of removed slots may take 32 MiB by design."""
BOUND_S = 10.0
COUNTERS: list[Any] = [0, -1, 2**25, 2**63, 10**30, 1e308]
RECORDS = ["store.json", "index/windows.json", "index/index.json"]
CONTENT_FIELDS = ("starts", "ends", "weights")
"""Window table fields that are content, not counters: a crafted value in bounds is served as the file says."""
QUERY = np.ones(8, dtype=np.float32)


def build_store() -> DocumentStore[TextDocument]:
    """A multi-vector store of four documents, one of them removed (its windows keep their slots)."""
    store: DocumentStore[TextDocument] = DocumentStore(
        gpu=False, multivector=True, embedder=WindowEmbedder(), name="ProbeStore"
    )
    documents = [TextDocument(f"d{i}", f"text {i}", {"n": i}) for i in range(5)]
    store.add_windows(documents, WindowEmbedder().embed_document_windows([d.text for d in documents]))
    store.delete(["d0"])
    return store


def served(store: DocumentStore[TextDocument]) -> tuple[Any, ...]:
    """What a store gives back: its records by int id and a search's hits."""
    hits = store.search(QUERY, 4)
    records = sorted((int_id, record) for int_id, record in store.records.records.items())
    return records, [(hit.record.key, round(hit.score, 5), hit.best_window) for hit in hits]


def measured(call: Callable[[], Any]) -> Any:
    """`call()` within the time bound and the allocation bound; what it raised is raised again."""
    tracemalloc.start()
    try:
        return bounded(call, BOUND_S)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < PEAK_BYTES, f"a crafted read allocated {peak} bytes"


@pytest.fixture(scope="module")
def saved() -> tuple[DocumentStore[TextDocument], tuple[Any, ...]]:
    store = build_store()
    return store, served(store)


# ------------------------------------------------------------------------------------------------ serialized stores


def sealed(body: bytes) -> bytes:
    return STORE_BYTES_HEADER + hashlib.sha256(body).digest() + body


def members_of(body: bytes) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as archive:
        return [
            (member, archive.extractfile(member).read() if member.isfile() else None)  # type: ignore[union-attr]
            for member in archive.getmembers()
        ]


def packed(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member, content in members:
            archive.addfile(member, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


odd_names = st.sampled_from(
    ["", ".", "..", "./store.json", "/tmp/x", "store.json", "store.json/x", "index/index.json/x", "index", "a\\b", "x"]
)
crafted_member = st.tuples(
    st.sampled_from(["sparse-pax", "sparse-gnu", "oversized", "plain", "folder", "link", "device", "cut"]),
    odd_names,
    st.sampled_from([0, 10, 2**20, 256 << 20]),
)


def crafted_archive(body: bytes, kind: str, name: str, size: int) -> bytes:
    """A real archive `body` with one crafted member added (or cut short, for "cut")."""
    members = members_of(body)
    if kind == "cut":
        return body[: max(0, len(body) - size % len(body) - 1)]
    info = tarfile.TarInfo(name)
    content: bytes | None = b"0123456789"
    info.size = len(content)
    if kind == "sparse-pax":
        info.pax_headers = {"GNU.sparse.map": "0,10", "GNU.sparse.realsize": str(size), "GNU.sparse.name": name}
    elif kind == "sparse-gnu":
        info.type = tarfile.GNUTYPE_SPARSE
    elif kind == "folder":
        info.type, content = tarfile.DIRTYPE, None
        info.size = 0
    elif kind in ("link", "device"):
        info.type, info.linkname, content = (tarfile.SYMTYPE if kind == "link" else tarfile.CHRTYPE), "/dev/zero", None
        info.size = 0
    if kind == "oversized":  # a first header declaring `size` bytes, then the real archive
        oversized = tarfile.TarInfo(name)
        oversized.size = size
        return oversized.tobuf(tarfile.PAX_FORMAT) + b"{}".ljust(512, b"\0") + packed(members)
    return packed([*members, (info, content)])


def check_bytes_refusal(error: BaseException) -> None:
    assert isinstance(error, ValueError) and not isinstance(error, tarfile.TarError), repr(error)
    message = str(error)
    assert "serialized ProbeStore" in message or any(name in message for name in ("store.json", ".json", ".faiss"))
    assert "Traceback" not in message


def read_bytes(data: bytes) -> DocumentStore[TextDocument]:
    return store_from_bytes(  # type: ignore[no-any-return]
        data,
        lambda folder: load_store(
            FORMAT, folder / "store.json", folder / "index", gpu=False, embedder=None, missing="no store here"
        ),
        "ProbeStore",
    )


def check_bytes(data: bytes, expected: tuple[Any, ...]) -> None:
    try:
        store = measured(lambda: read_bytes(data))
    except BaseException as error:
        check_bytes_refusal(error)
    else:
        assert served(store) == expected


@FUZZ
@given(body=st.one_of(st.binary(max_size=3000), st.just(b"\0" * 1024), st.just(b"")))
def test_random_bodies_with_a_valid_digest_are_refused_naming_the_cause(
    saved: tuple[DocumentStore[TextDocument], tuple[Any, ...]], body: bytes
) -> None:
    check_bytes(sealed(body), saved[1])


@FUZZ
@given(
    flips=st.lists(st.tuples(st.integers(0, 2**31), st.integers(1, 255)), min_size=1, max_size=4),
    member=st.one_of(st.none(), crafted_member),
)
def test_a_crafted_archive_is_refused_naming_the_member_or_served_as_saved(
    saved: tuple[DocumentStore[TextDocument], tuple[Any, ...]],
    flips: list[tuple[int, int]],
    member: tuple[str, str, int] | None,
) -> None:
    store, expected = saved
    data = store_bytes(store, FORMAT, "store.json", "index")
    body = bytearray(data[len(STORE_BYTES_HEADER) + hashlib.sha256().digest_size :])
    if member is not None:
        body = bytearray(crafted_archive(bytes(body), *member))
    else:
        for position, change in flips:
            if body:
                body[position % len(body)] ^= change
    check_bytes(sealed(bytes(body)), expected)


# ------------------------------------------------------------------------------------------------ recorded counters


def integer_fields(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The paths of the integer fields of a JSON value (of a list: its first and last items)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from integer_fields(item, (*path, key))
    elif isinstance(value, list):
        for position in sorted({0, len(value) - 1}) if value else ():
            yield from integer_fields(value[position], (*path, position))
    elif isinstance(value, int) and not isinstance(value, bool) and "metadata" not in path:
        yield path  # a document's own metadata is served as the file says: no counter


@pytest.fixture(scope="module")
def saved_folder(
    tmp_path_factory: pytest.TempPathFactory, saved: tuple[DocumentStore[TextDocument], tuple[Any, ...]]
) -> Path:
    folder = tmp_path_factory.mktemp("counters") / "store"
    folder.mkdir()
    save_store(saved[0], FORMAT, folder / "store.json", folder / "index", overwrite=True)
    return folder


def fields_of_records() -> list[tuple[str, tuple[Any, ...]]]:
    """(record, path) of every integer field of the records `build_store` saves (listed when the tests are
    collected, so each is a value hypothesis draws from)."""
    with tempfile.TemporaryDirectory(prefix="fair-fields-") as temporary:
        root = Path(temporary)
        save_store(build_store(), FORMAT, root / "store.json", root / "index", overwrite=True)
        return [(name, path) for name in RECORDS for path in integer_fields(json.loads((root / name).read_text()))]


FIELDS = fields_of_records()


def set_field(document: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        document = document[step]
    document[path[-1]] = value


def resealed(folder: Path, name: str, path: tuple[Any, ...], value: Any) -> None:
    """Set one field of a record and make every checksum agree again, as a crafted folder would."""
    record_path = folder / "index" / "index.json"
    content = json.loads((folder / name).read_text())
    set_field(content, path, value)
    (folder / name).write_text(json.dumps(content))
    record = json.loads(record_path.read_text())
    if name != "index/index.json":
        raw = (folder / name).read_bytes()
        listed = "../store.json" if name == "store.json" else "windows.json"
        record["publication"]["files"][listed] = {"bytes": len(raw), "crc32": zlib.crc32(raw)}
    if isinstance(record.get("publication"), dict):
        record["publication"]["record_crc32"] = record_crc32(record)
    record_path.write_text(json.dumps(record))


def test_the_fields_cover_every_record_and_its_counters() -> None:
    listed = set(FIELDS)
    for expected in [("store.json", ("next_int_id",)), ("index/windows.json", ("next_window",))]:
        assert expected in listed, expected
    assert {name for name, _ in FIELDS} == set(RECORDS) and len(FIELDS) > 20


@pytest.mark.parametrize("value", COUNTERS, ids=repr)
@pytest.mark.parametrize("field", FIELDS, ids=lambda field: f"{field[0]}:{'.'.join(map(str, field[1]))}")
def test_a_crafted_counter_is_refused_naming_the_file_or_served_as_saved(
    saved: tuple[DocumentStore[TextDocument], tuple[Any, ...]],
    saved_folder: Path,
    tmp_path_factory: pytest.TempPathFactory,
    field: tuple[str, tuple[Any, ...]],
    value: Any,
) -> None:
    """Every integer field of every record, each of `COUNTERS` (exhaustive: a few hundred loads of a tiny store)."""
    folder = tmp_path_factory.mktemp("counter") / "store"
    shutil.copytree(saved_folder, folder)
    name, path = field
    resealed(folder, name, path, value)
    try:
        store = measured(
            lambda: load_store(FORMAT, folder / "store.json", folder / "index", gpu=False, embedder=None, missing="-")
        )
    except BaseException as error:
        assert isinstance(error, ValueError), repr(error)
        assert any(part in str(error) for part in ("store.json", "windows.json", "index.json", "index.faiss")), error
    else:
        records, hits = served(store)
        assert records == saved[1][0], (name, path, value)
        if path[0] in CONTENT_FIELDS:  # a window's span or weight: served as the crafted file says
            assert [key for key, _, _ in hits] == [key for key, _, _ in saved[1][1]]
        else:
            assert hits == saved[1][1], (name, path, value)


# ------------------------------------------------------------------------------------------------ an index folder


CLI_RECORDS = ["manifest.json", "index.json"]


def cli_fields() -> list[tuple[str, tuple[Any, ...]]]:
    """(record, path) of every integer field of the records of a `fair-retrieval index` folder (pooled index)."""
    with tempfile.TemporaryDirectory(prefix="fair-fields-") as temporary:
        folder = build_cli_folder(Path(temporary) / "index", 1)
        return [
            (name, path) for name in CLI_RECORDS for path in integer_fields(json.loads((folder / name).read_text()))
        ]


CLI_FIELDS = cli_fields()


@pytest.fixture(scope="module")
def cli_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_cli_folder(tmp_path_factory.mktemp("cli-counters") / "index", 1)


@pytest.mark.parametrize("value", COUNTERS, ids=repr)
@pytest.mark.parametrize("field", CLI_FIELDS, ids=lambda field: f"{field[0]}:{'.'.join(map(str, field[1]))}")
def test_a_crafted_counter_of_an_index_folder_is_refused_naming_the_file_or_searched_as_saved(
    cli_folder: Path, tmp_path_factory: pytest.TempPathFactory, field: tuple[str, tuple[Any, ...]], value: Any
) -> None:
    folder = tmp_path_factory.mktemp("cli-counter") / "index"
    shutil.copytree(cli_folder, folder)
    name, path = field
    content = json.loads((folder / name).read_text())
    set_field(content, path, value)
    (folder / name).write_text(json.dumps(content))
    record = json.loads((folder / "index.json").read_text())
    if name != "index.json":
        raw = (folder / name).read_bytes()
        record["publication"]["files"][name] = {"bytes": len(raw), "crc32": zlib.crc32(raw)}
    if isinstance(record.get("publication"), dict):
        record["publication"]["record_crc32"] = record_crc32(record)
    (folder / "index.json").write_text(json.dumps(record))
    try:
        held = measured(lambda: load_cli(folder))
    except BaseException as error:
        assert isinstance(error, ValueError), repr(error)
        assert any(part in str(error) for part in [*CLI_RECORDS, "index.faiss", "documents.jsonl"]), error
    else:
        assert held == load_cli(cli_folder), (name, path, value)
