"""`FaissVectorStore.deserialize_from_bytes` on crafted bytes whose SHA-256 is computed again, as someone who knows
the format would: sparse members (GNU type, sparse maps, PAX ``GNU.sparse.*`` headers), members that declare more
than the archive holds, odd names ('', '.', nested under a file, repeated), links, random bodies and short data.
Each is a ValueError naming the member and the cause, before anything is allocated for it; nothing else is raised."""

from __future__ import annotations

import hashlib
import io
import tarfile
import tracemalloc

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_fair import FaissVectorStore

from fair_retrieval.stores.store_archive import STORE_BYTES_HEADER

pytest.importorskip("faiss")

SPARSE_SIZE = 256 << 20
PEAK_BYTES = 16 << 20
"""What unpacking a crafted archive may allocate at most (its members are refused before they are read)."""


def embeddings() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=8)


def sealed(body: bytes) -> bytes:
    """`body` behind the header and its own SHA-256, as `serialize_to_bytes` seals an archive."""
    return STORE_BYTES_HEADER + hashlib.sha256(body).digest() + body


def saved_members() -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """The members of a real store's bytes, with their contents (None for a folder)."""
    data = FaissVectorStore.from_texts(["a", "b"], embeddings(), ids=["a", "b"], gpu=False).serialize_to_bytes()
    body = data[len(STORE_BYTES_HEADER) + hashlib.sha256().digest_size :]
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as archive:
        return [
            (member, archive.extractfile(member).read() if member.isfile() else None)  # type: ignore[union-attr]
            for member in archive.getmembers()
        ]


def archive(members: list[tuple[tarfile.TarInfo, bytes | None]], form: int = tarfile.PAX_FORMAT) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=form) as packed:
        for member, content in members:
            packed.addfile(member, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


def member(name: str, content: bytes, **pax: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(content)
    info.pax_headers = dict(pax)
    return info, content


def refused(data: bytes) -> str:
    """The message of the ValueError `deserialize_from_bytes` raises for `data`, its allocations bounded."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as caught:
            FaissVectorStore.deserialize_from_bytes(data, embeddings(), gpu=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert type(caught.value) is not tarfile.ReadError and peak < PEAK_BYTES, (caught.value, peak)
    return str(caught.value)


def test_a_sparse_member_declared_huge_is_refused_before_it_is_read() -> None:
    sparse = member(
        "store.json",
        b"0123456789",
        **{"GNU.sparse.map": "0,10", "GNU.sparse.realsize": str(SPARSE_SIZE), "GNU.sparse.name": "store.json"},
    )
    message = refused(sealed(archive([sparse])))
    assert "'store.json'" in message and "sparse" in message and "GNU.sparse" in message


def test_a_gnu_sparse_member_is_refused() -> None:
    info, content = member("store.json", b"{}")
    info.type = tarfile.GNUTYPE_SPARSE
    message = refused(sealed(archive([(info, content)], tarfile.GNU_FORMAT)))
    assert "'store.json'" in message and "sparse" in message


def test_a_member_larger_than_the_archive_is_refused() -> None:
    info, _ = member("store.json", b"{}")
    info.size = SPARSE_SIZE
    body = info.tobuf(tarfile.PAX_FORMAT) + b"{}".ljust(1024, b"\0")  # the header declares far more than follows
    message = refused(sealed(body))
    assert "'store.json'" in message and f"declares {SPARSE_SIZE} bytes" in message


def test_a_member_cut_short_is_refused_naming_it() -> None:
    members = saved_members()
    store_file, content = members[-1]
    assert store_file.name == "store.json" and content is not None
    body = archive(members)
    cut = body[: body.index(content) + 100]  # its header whole, its data cut short
    message = refused(sealed(cut))
    assert (
        f"'store.json', which is cut short: its header declares {len(content)} bytes, the archive ends 100" in message
    )


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("", "not a plain relative name"),
        (".", "not a plain relative name"),
        ("./store.json", "not a plain relative name"),
        ("index/../store.json", "not a plain relative name"),
        ("/tmp/store.json", "not a plain relative name"),
        ("store.json/x", "lies under 'store.json'"),
        ("store.json", "comes twice"),
    ],
)
def test_odd_member_names_are_refused_naming_the_member(name: str, cause: str) -> None:
    members = [*saved_members(), member(name, b"x")]
    message = refused(sealed(archive(members)))
    assert f"member {name!r}" in message and cause in message


def test_a_folder_member_named_like_a_file_is_refused() -> None:
    folder = tarfile.TarInfo("store.json")
    folder.type = tarfile.DIRTYPE
    message = refused(sealed(archive([*saved_members(), (folder, None)])))
    assert "member 'store.json'" in message and "comes twice" in message


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE])
def test_links_and_devices_are_refused(kind: bytes) -> None:
    info = tarfile.TarInfo("store.json")
    info.type, info.linkname = kind, "/dev/zero"
    message = refused(sealed(archive([(info, None)])))
    assert "member 'store.json'" in message and "not a regular file" in message


@pytest.mark.parametrize("body", [b"", b"\0" * 10, b"x" * 700, bytes(range(256)) * 8, b"\0" * 2048])
def test_random_bodies_and_short_data_with_a_matching_digest_are_value_errors(body: bytes) -> None:
    message = refused(sealed(body))
    assert "serialized FaissVectorStore" in message and "Serialize the store again" in message


def test_the_saved_bytes_still_round_trip() -> None:
    store = FaissVectorStore.from_texts(["a", "b"], embeddings(), ids=["a", "b"], gpu=False)
    again = FaissVectorStore.deserialize_from_bytes(sealed(archive(saved_members())), embeddings(), gpu=False)
    assert again.ids == store.ids
    assert again.similarity_search_with_score("a", k=2) == store.similarity_search_with_score("a", k=2)
