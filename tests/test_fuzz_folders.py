"""Fuzz tests (hypothesis) over crafted saved folders: random edits of the commit record (with or without its
CRC-32 computed again, as an attacker who knows the format would), names it lists (`..`, absolute, nested, odd),
files replaced by links (to /dev/zero, outside, inside, to a folder, dangling) or FIFOs, store files rewritten.

Whatever was done, a load is refused with a ValueError or FileNotFoundError that names a file of the folder, or
returns exactly what was saved; it never reads or writes outside the folder (a save after it neither), never hangs
(each load is time-bounded), and never raises anything else. Derandomised and bounded: they run in seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fair_retrieval import FaissIndex  # noqa: E402
from fair_retrieval.jsonio import StoreConflictError  # noqa: E402
from fair_retrieval.jsonio.snapshot import record_crc32  # noqa: E402
from fair_retrieval.jsonio.versioned import parse_json  # noqa: E402
from fair_retrieval.stores.files import load_store_file, save_store_file  # noqa: E402
from tests.test_crafted_folders import bounded, load_cli  # noqa: E402
from tests.test_faults import build_cli_folder  # noqa: E402

pytest.importorskip("faiss")

FUZZ = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
NAMES = ["index.json", "index.faiss", "store.json", "manifest.json", "documents.jsonl", "index"]
SECRET = b'{"secret": true}\n'

odd_names = st.sampled_from(
    [
        "../store.json",
        "../outside.json",
        "../../outside.json",
        "/etc/passwd",
        "..",
        ".",
        "",
        "a/b.json",
        "..\\x.json",
        "index.faiss/..",
        "~/x.json",
        "manifest.json",
        "windows.json",
        "nul\0.json",
    ]
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**40),
    st.text(max_size=8),
    odd_names,
    st.lists(st.integers(0, 3), max_size=3),
    st.dictionaries(odd_names, st.fixed_dictionaries({"bytes": st.integers(0, 99), "crc32": st.integers(0, 9)})),
)
edit = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(["format", "version", "count", "dim", "kind", "factory", "ids"]), values),
    st.tuples(st.just("publication"), st.sampled_from(["token", "files", "record_crc32", "extra"]), values),
    st.tuples(st.just("list"), odd_names, st.sampled_from(["index.faiss", "outside", "store.json"])),
    st.tuples(st.just("drop"), st.sampled_from(["index.faiss", "../store.json", "publication"]), st.none()),
    st.tuples(
        st.just("link"),
        st.sampled_from(["index/index.faiss", "index/index.json", "store.json", "index"]),
        st.sampled_from(["/dev/zero", "outside", "inside", "folder", "dangling", "fifo"]),
    ),
    st.tuples(st.just("store"), st.sampled_from(["byte", "json", "empty"]), st.booleans()),
)


def safe_read(path: Path) -> bytes:
    """The bytes of a regular file (b"" for a link, a FIFO, a folder or nothing): the helper never hangs."""
    return Path.read_bytes(path) if path.is_file() and not path.is_symlink() else b""


def entry(raw: bytes) -> dict[str, int]:
    import zlib

    return {"bytes": len(raw), "crc32": zlib.crc32(raw)}


def apply(root: Path, folder: Path, record: Path, change: tuple[str, Any, Any], reseal: bool) -> None:
    """Apply one crafted change to `folder` (whose commit record is `record`); `root` holds files outside it."""
    kind, key, value = change
    if kind == "link":
        path = folder / key
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
        if value == "fifo":
            os.mkfifo(path)
            return
        target = {
            "/dev/zero": Path("/dev/zero"),
            "outside": root / "outside.json",
            "inside": folder / "store.json" if key != "store.json" else folder / "index" / "index.json",
            "folder": root,
            "dangling": root / "nothing-here",
        }[value]
        path.symlink_to(target)
        return
    if kind == "store":
        path = folder / "store.json"
        raw = safe_read(path)
        raw = {"byte": raw[:5] + b"X" + raw[6:], "json": b'{"has_index": true, "n": 99}', "empty": b""}[key]
        path.write_bytes(raw)
        if value:  # the record updated to match, as an attacker would
            update = json.loads(safe_read(record))
            update["publication"]["files"]["../store.json"] = entry(raw)
            update["publication"]["record_crc32"] = record_crc32(update)
            record.write_text(json.dumps(update))
        return
    value_ = json.loads(safe_read(record))
    block = value_.setdefault("publication", {})
    files = block.get("files") if isinstance(block, dict) and isinstance(block.get("files"), dict) else {}
    if kind == "set":
        value_[key] = value
    elif kind == "publication" and isinstance(block, dict):
        block[key] = value
    elif kind == "list":
        files[key] = {
            "index.faiss": entry(safe_read(folder / "index" / "index.faiss")),
            "outside": entry(SECRET),
        }.get(value, entry(safe_read(folder / "store.json")))
    elif kind == "drop":
        if key == "publication":
            value_.pop("publication", None)
        else:
            files.pop(key, None)
    if reseal and isinstance(value_.get("publication"), dict):
        with contextlib.suppress(TypeError, ValueError):
            value_["publication"]["record_crc32"] = record_crc32(value_)
    record.write_text(json.dumps(value_))


def restore_from(folder: Path):  # type: ignore[no-untyped-def]
    def restore(raw: bytes) -> tuple[Any, int]:
        state = parse_json(folder / "store.json", raw, "Rebuild the store.")  # as the adapters parse it
        return state, len(FaissIndex.load(folder / "index", gpu=False))

    return restore


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz-template") / "store"
    folder.mkdir()
    index = FaissIndex(8, gpu=False)
    index.add(np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32))
    save_store_file(folder / "store.json", b'{"has_index": true, "n": 6}', index, folder / "index")
    return folder


def outside_untouched(root: Path) -> bool:
    return safe_read(root / "outside.json") == SECRET and not (root / "nothing-here").exists()


def check_refusal(error: BaseException) -> None:
    assert isinstance(error, (ValueError, FileNotFoundError)), repr(error)
    message = str(error)
    assert any(name in message for name in NAMES), message
    assert "Traceback" not in message


@FUZZ
@given(changes=st.lists(edit, min_size=1, max_size=3), reseal=st.booleans())
def test_a_crafted_store_folder_is_refused_naming_a_file_or_served_as_saved(
    template: Path, tmp_path_factory: pytest.TempPathFactory, changes: list[tuple[str, Any, Any]], reseal: bool
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "outside.json").write_bytes(SECRET)
    folder = root / "store"
    shutil.copytree(template, folder)
    for change in changes:
        # an earlier change can make this one impossible (the record is a link, a FIFO, gone)
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            apply(root, folder, folder / "index" / "index.json", change, reseal)
    try:
        state, held = bounded(
            lambda: load_store_file(folder / "store.json", folder / "index", restore_from(folder), missing="no store"),
            10,
        )
    except BaseException as error:
        check_refusal(error)
    else:
        # exactly what the folder's committed files hold: as saved, or as crafted consistently (checksums redone)
        assert state == json.loads(safe_read(folder / "store.json")) and held == 6
    index = FaissIndex(8, gpu=False)
    index.add(np.ones((2, 8), dtype=np.float32))
    try:  # a save into the crafted folder writes inside it or nowhere
        bounded(
            lambda: save_store_file(folder / "store.json", b'{"n": 2}', index, folder / "index", overwrite=True), 10
        )
    except StoreConflictError:
        pass
    except BaseException as error:
        check_refusal(error)
    assert outside_untouched(root)


@pytest.fixture(scope="module")
def cli_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_cli_folder(tmp_path_factory.mktemp("fuzz-cli") / "index", 1)


cli_edit = st.one_of(
    st.tuples(st.just("manifest"), st.sampled_from(["documents", "model", "count", "multivector"]), values),
    st.tuples(
        st.just("link"),
        st.sampled_from(["index.json", "manifest.json", "documents.jsonl", "index.faiss"]),
        st.sampled_from(["/dev/zero", "outside", "fifo", "dangling"]),
    ),
    st.tuples(st.just("list"), odd_names, st.just("outside")),
)


@FUZZ
@given(changes=st.lists(cli_edit, min_size=1, max_size=3))
def test_a_crafted_index_folder_is_refused_naming_a_file_or_searched_as_saved(
    cli_template: Path, tmp_path_factory: pytest.TempPathFactory, changes: list[tuple[str, Any, Any]]
) -> None:
    root = tmp_path_factory.mktemp("fuzz-cli-run")
    (root / "outside.json").write_bytes(SECRET)
    folder = root / "index"
    shutil.copytree(cli_template, folder)
    for kind, key, value in changes:
        try:
            if kind == "manifest":  # rewritten and committed again with valid checksums
                manifest = json.loads(safe_read(folder / "manifest.json"))
                manifest[key] = value
                (folder / "manifest.json").write_text(json.dumps(manifest))
                record = json.loads(safe_read(folder / "index.json"))
                record["publication"]["files"]["manifest.json"] = entry(safe_read(folder / "manifest.json"))
                record["publication"]["record_crc32"] = record_crc32(record)
                (folder / "index.json").write_text(json.dumps(record))
            elif kind == "link":
                (folder / key).unlink(missing_ok=True)
                if value == "fifo":
                    os.mkfifo(folder / key)
                else:
                    (folder / key).symlink_to(
                        {"/dev/zero": "/dev/zero", "outside": root / "outside.json", "dangling": root / "nothing-here"}[
                            value
                        ]
                    )
            else:
                apply(root, folder, folder / "index.json", ("list", key, value), True)
        except (OSError, ValueError, TypeError, AttributeError, KeyError, json.JSONDecodeError):
            pass
    try:
        count = bounded(lambda: load_cli(folder), 10)
    except BaseException as error:
        check_refusal(error)
    else:
        assert count == len(FaissIndex.load(cli_template, gpu=False))
        assert json.loads(safe_read(folder / "manifest.json")).get("documents", "documents.jsonl") == (
            "documents.jsonl"
        )
    assert outside_untouched(root)
