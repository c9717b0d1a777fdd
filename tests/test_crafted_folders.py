"""Crafted and damaged folders: what an attacker who controls a saved folder can and cannot make a load or a save do.

Every file kind (index.json, index.faiss, windows.json, store.json, manifest.json, documents.jsonl) flipped,
truncated, deleted, swapped with another folder's copy, replaced by a symbolic link or by a FIFO is refused naming
the file, within a time bound; records listing names outside the folder, subfolders that are links leading out,
manifests pointing elsewhere, aliases of a folder, huge k: each one as the reliability guide states it.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fair_retrieval import FaissIndex, MultiVectorIndex
from fair_retrieval.cli.index_folder import read_manifest, read_rows
from fair_retrieval.jsonio import DamagedFileError, StoreConflictError
from fair_retrieval.jsonio.snapshot import record_crc32
from fair_retrieval.stores.files import load_store_file, save_store_file, store_generation
from tests.index.test_multivector import random_windows
from tests.test_faults import build_cli_folder, build_index

pytest.importorskip("faiss")

BOUND_S = 20.0
"""The longest any single load of a crafted folder may take (a hang fails the test instead of the run)."""


def bounded(call: Callable[[], Any], seconds: float = BOUND_S) -> Any:
    """`call()`'s result, or what it raised; a call still running after `seconds` fails the test (it hung)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed back to the test
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the call did not return within {seconds} s (it hangs)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def reseal(record_path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit a record and compute its CRC-32 again, as an attacker who knows the format would."""
    record = json.loads(record_path.read_text())
    edit(record)
    record["publication"]["record_crc32"] = record_crc32(record)
    record_path.write_text(json.dumps(record))


def entry(path: Path) -> dict[str, int]:
    raw = path.read_bytes()
    return {"bytes": len(raw), "crc32": zlib.crc32(raw)}


# ------------------------------------------------------------------------------------------------ a store folder


def store_state(windows: int) -> bytes:
    return json.dumps({"has_index": True, "n": windows}).encode()


def save_store(folder: Path, documents: int, seed: int = 0, *, overwrite: bool = True) -> None:
    """A store folder as the adapters save it: store.json published with a multi-vector index in index/."""
    folder.mkdir(parents=True, exist_ok=True)
    index = MultiVectorIndex(16)
    index.add(random_windows(documents, seed=seed))
    save_store_file(folder / "store.json", store_state(documents), index, folder / "index", overwrite=overwrite)


def load_store(folder: Path) -> tuple[dict[str, Any], int]:
    def restore(raw: bytes) -> tuple[dict[str, Any], int]:
        return json.loads(raw), len(MultiVectorIndex.load(folder / "index", gpu=False))

    return load_store_file(folder / "store.json", folder / "index", restore, missing="no store here")  # type: ignore[no-any-return]


def load_cli(folder: Path) -> int:
    read_manifest(folder)
    held = len(FaissIndex.load(folder, gpu=False))
    read_rows(folder / "documents.jsonl", set(range(held)))
    return held


STORE_FILES = ["index/index.json", "index/index.faiss", "index/windows.json", "store.json"]
CLI_FILES = ["index.json", "index.faiss", "manifest.json", "documents.jsonl"]
DAMAGES = ["flip", "truncate", "delete", "swap", "link", "fifo"]


def spoil(path: Path, other: Path, how: str) -> None:
    """Damage `path` as `how` says; `other` is the same file of another folder (for "swap")."""
    data = path.read_bytes()
    if how == "flip":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1 :])
    elif how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "delete":
        path.unlink()
    elif how == "swap":
        shutil.copyfile(other, path)
    elif how == "link":
        path.unlink()
        path.symlink_to("/dev/zero")
    else:
        path.unlink()
        os.mkfifo(path)


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("name", STORE_FILES + [f"cli/{name}" for name in CLI_FILES])
def test_every_damaged_file_is_refused_naming_it(tmp_path: Path, name: str, how: str) -> None:
    if name.startswith("cli/"):
        name = name.removeprefix("cli/")
        folder, other = build_cli_folder(tmp_path / "a", 1), build_cli_folder(tmp_path / "b", 2)
        load: Callable[[], Any] = lambda: load_cli(folder)  # noqa: E731
    else:
        folder, other = tmp_path / "a", tmp_path / "b"
        save_store(folder, 6, seed=1)
        save_store(other, 9, seed=2)
        load = lambda: load_store(folder)  # noqa: E731
    spoil(folder / name, other / name, how)
    with pytest.raises((ValueError, FileNotFoundError)) as caught:
        bounded(load)
    message = str(caught.value)
    assert "Errno" not in message and "\n" not in message
    named = Path(name).name
    if how == "swap" and named == "index.json":  # another valid record: the first file it disagrees with is named
        assert "index.json records" in message or "index.json" in message
    else:
        assert any(f"{named} {is_}" in message for is_ in ("is damaged", "is missing", "does not exist")), message


def test_a_record_without_its_publication_is_refused_naming_it(tmp_path: Path) -> None:
    save_store(tmp_path, 4)
    record = tmp_path / "index" / "index.json"
    value = json.loads(record.read_text())
    del value["publication"]
    record.write_text(json.dumps(value))
    with pytest.raises(DamagedFileError, match=r"index\.json is damaged: it has no 'publication' entry") as caught:
        load_store(tmp_path)
    assert caught.value.path == record
    with pytest.raises(DamagedFileError, match=r"index\.json is damaged: it has no 'publication'"):
        MultiVectorIndex.load(tmp_path / "index", gpu=False)


def test_a_damaged_record_is_named_not_its_files(tmp_path: Path) -> None:
    """A record that lists no index.faiss any more (edited without its CRC-32) is the record's damage."""
    save_store(tmp_path, 4)
    record = tmp_path / "index" / "index.json"
    value = json.loads(record.read_text())
    del value["publication"]["files"]["index.faiss"]
    record.write_text(json.dumps(value))
    for load in (lambda: FaissIndex.load(tmp_path / "index", gpu=False), lambda: load_store(tmp_path)):
        with pytest.raises(DamagedFileError, match=r"index\.json is damaged: its content differs from the CRC-32"):
            load()


def test_a_multivector_folder_is_never_called_pooled_and_a_deleted_table_is_named(tmp_path: Path) -> None:
    save_store(tmp_path, 4)
    (tmp_path / "index" / "windows.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"windows\.json is missing, though .*index\.json lists it") as caught:
        MultiVectorIndex.load(tmp_path / "index", gpu=False)
    assert "Errno" not in str(caught.value) and "pooled" not in str(caught.value)


# ------------------------------------------------------------------------------------------------ outside the folder


def test_a_record_listing_a_file_outside_cannot_make_a_save_write_it(tmp_path: Path) -> None:
    folder = tmp_path / "idx"
    build_index(1).save(folder)
    settings = tmp_path / "settings.json"
    settings.write_text('{"mine": true}')
    record = folder / "index.json"
    token = json.loads(record.read_text())["publication"]["token"]
    (tmp_path / f"settings.json.{token}.tmp").write_text('{"attacker": true}')
    reseal(record, lambda value: value["publication"]["files"].update({"../settings.json": entry(settings)}))
    loaded = FaissIndex.load(folder, gpu=False)  # the index itself is whole: it loads
    loaded.save(folder)
    assert settings.read_text() == '{"mine": true}'
    for crafted in ("../../etc/passwd", "/etc/passwd", "sub/index.faiss", ".."):
        build_index(1).save(folder, overwrite=True)
        reseal(record, lambda value, name=crafted: value["publication"]["files"].update({name: entry(settings)}))
        with pytest.raises(DamagedFileError, match=r"index\.json is damaged: it lists"):
            FaissIndex.load(folder, gpu=False)


def test_an_index_subfolder_linked_elsewhere_is_refused_on_save_and_load(tmp_path: Path) -> None:
    elsewhere, store = tmp_path / "elsewhere", tmp_path / "store"
    save_store(elsewhere, 3)
    store.mkdir()
    (store / "index").symlink_to(elsewhere / "index")
    index = MultiVectorIndex(16)
    index.add(random_windows(5))
    before = (elsewhere / "store.json").read_bytes()
    with pytest.raises(DamagedFileError, match=r"index is damaged: it leads out of"):
        save_store_file(store / "store.json", store_state(5), index, store / "index", overwrite=True)
    assert (elsewhere / "store.json").read_bytes() == before and not (store / "store.json").exists()
    (store / "store.json").write_bytes(before)
    with pytest.raises(DamagedFileError, match=r"index is damaged: it leads out of"):
        load_store(store)


def test_a_file_linked_outside_the_folder_is_refused(tmp_path: Path) -> None:
    save_store(tmp_path / "a", 4)
    outside = tmp_path / "outside.json"
    shutil.move(tmp_path / "a" / "store.json", outside)
    (tmp_path / "a" / "store.json").symlink_to(outside)  # same bytes, but not in the folder
    with pytest.raises(DamagedFileError, match=r"store\.json is damaged: it leads out of"):
        load_store(tmp_path / "a")


def test_a_manifest_cannot_point_search_at_another_file(tmp_path: Path) -> None:
    folder = build_cli_folder(tmp_path / "index", 1)
    (tmp_path / "private.jsonl").write_text('{"id": "secret", "text": "secret", "metadata": {}}\n')
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "documents": "../private.jsonl"}))
    reseal(
        folder / "index.json",
        lambda value: value["publication"]["files"].update({"manifest.json": entry(folder / "manifest.json")}),
    )
    with pytest.raises(DamagedFileError, match=r"manifest\.json is damaged: it names the documents '\.\./private"):
        read_manifest(folder)


# ------------------------------------------------------------------------------------------------ aliases, fresh saves


def test_a_stale_writer_through_an_alias_is_refused(tmp_path: Path) -> None:
    real, alias = tmp_path / "real", tmp_path / "alias"
    build_index(1).save(real)
    alias.symlink_to(real)
    stale = FaissIndex.load(real, gpu=False)
    newer = FaissIndex.load(real, gpu=False)
    newer.add(np.ones((1, 16), dtype=np.float32), [5])
    newer.save(real)
    with pytest.raises(StoreConflictError):
        stale.save(alias)
    assert 5 in FaissIndex.load(real, gpu=False)
    # the same for a store file
    save_store(tmp_path / "s", 3)
    raw = (tmp_path / "s" / "store.json").read_bytes()
    base = store_generation(tmp_path / "s" / "store.json", raw)
    save_store(tmp_path / "s", 4)
    (tmp_path / "s-alias").symlink_to(tmp_path / "s")
    with pytest.raises(StoreConflictError):
        index = MultiVectorIndex(16)
        index.add(random_windows(2))
        save_store_file(
            tmp_path / "s-alias" / "store.json", store_state(2), index, tmp_path / "s-alias" / "index", base=base
        )
    assert load_store(tmp_path / "s")[0]["n"] == 4


def test_a_fresh_store_never_replaces_a_saved_one_silently(tmp_path: Path) -> None:
    save_store(tmp_path, 3, overwrite=False)
    with pytest.raises(StoreConflictError, match=r"already holds a saved store.*overwrite=True"):
        save_store(tmp_path, 5, overwrite=False)
    assert load_store(tmp_path)[0]["n"] == 3
    save_store(tmp_path, 5, overwrite=True)
    assert load_store(tmp_path)[0]["n"] == 5


# ------------------------------------------------------------------------------------------------ huge k


def test_a_huge_k_is_clamped_to_what_the_index_holds() -> None:
    index = FaissIndex(16, gpu=False)
    index.add(np.eye(16, dtype=np.float32)[:5])
    _, found = bounded(lambda: index.search(np.eye(16, dtype=np.float32)[:2], 10**9), 10)
    assert found.shape[1] <= 1024 and sorted(found[0][found[0] >= 0].tolist()) == [0, 1, 2, 3, 4]
    multi = MultiVectorIndex(16)
    multi.add(random_windows(5))
    _, found = bounded(lambda: multi.search(random_windows(1).vectors[:1], 10**9), 10)
    assert found.shape[1] <= 1024 and (found[0] >= 0).sum() == 5
    assert len(multi.search_documents(random_windows(1).vectors[0], 10**9)) == 5
