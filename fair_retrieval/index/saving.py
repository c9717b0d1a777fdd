"""Saving and loading a `FaissIndex` (the methods `save` and `load`, mixed into the class): the record of what the
index is, written with the faiss file in one atomic commit, optimistic concurrency between writers, and the checked
read. The folder format itself (`index.faiss` + `index.json`, migrations, damage checks) is
`fair_retrieval.index.persistence`'s.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from typing_extensions import Self

from fair_retrieval.index.gpu import GpuChoice
from fair_retrieval.index.persistence import Companion, StoredIndex, UntrainedIvfpq, read_folder, write_folder
from fair_retrieval.jsonio.paths import folder_key

logger = logging.getLogger("fair_retrieval.index.faiss_index")  # FaissIndex's own logger


class _Savable(Protocol):
    """What `save` reads of the index it is mixed into (`FaissIndex`)."""

    _saved_at: tuple[str, str | None] | None

    @property
    def _index(self) -> Any: ...
    @property
    def _dim(self) -> int: ...
    @property
    def _metric(self) -> str: ...
    @property
    def _pending(self) -> Mapping[str, int]: ...
    @property
    def _search_override(self) -> Mapping[str, float]: ...
    @property
    def factory(self) -> str | None: ...
    @property
    def search_params(self) -> str: ...
    def __len__(self) -> int: ...
    def _id_policy(self) -> str: ...
    def _cpu_index(self, cache: bool = True) -> Any: ...


class SavedIndex:
    """`save` and `load` of `FaissIndex` (its base class; not used on its own)."""

    _saved_at: tuple[str, str | None] | None = None  # (folder, generation) loaded from or last saved to

    # A mixin: `self` is annotated with what save reads (`_Savable`), so mypy checks the body against that.
    def save(  # type: ignore[misc]
        self: _Savable,
        folder: str | os.PathLike[str],
        *,
        companions: Mapping[str, Companion] | None = None,
        overwrite: bool = False,
    ) -> Path:
        """Write `index.faiss` (a CPU faiss index) and `index.json` into `folder` (created if needed), atomically.

        index.faiss is written under a temporary name and fsynced; index.json, written last, commits it (with its
        size and CRC-32); then it is renamed into place (`fair_retrieval.jsonio.Publication`). Killed at any point,
        even by SIGKILL, the folder holds the previous index or this one, never a mix, and a `load` running
        meanwhile reads one of them. Saves into one folder run one after the other; the next save removes what a
        killed one left.

        Optimistic concurrency: an index loaded from `folder` (or loaded, then saved there) remembers the
        generation it read or wrote, and a save into that folder after another writer saved there is refused with
        `StoreConflictError` (nothing is written): load again, redo the change, save again. An index built in
        memory and saved where an index is already saved is refused the same way unless `overwrite=True`, so
        writers that each start from nothing never lose another's save silently. Once saved, an index remembers
        the folder: its next save there is checked as a loaded one's.

        Args:
            folder: the index folder.
            companions: files of an enclosing format to publish in the same commit, so that they change together
                with the index: name relative to `folder` (it may lead out of it, e.g. "../store.json") → a
                finished file with the new content, on the same file system, which is moved (not copied), its bytes,
                or a function that writes it to the path it is given (`persistence.Companion`). Readers find them
                through index.json with `jsonio.Snapshot`.
            overwrite: replace an index the folder holds that this one was neither loaded from nor saved as.

        Returns:
            The folder path.

        Raises:
            StoreConflictError: (a ValueError) another writer saved into `folder` since this index was loaded
                from it (or last saved there), or this index was not and the folder holds one (without
                `overwrite`).
        """
        record: dict[str, Any] = {
            "factory": self.factory,
            "ids": self._id_policy(),
            "search": self.search_params,
            "count": len(self),
        }
        if self._index is None:  # a sized ivfpq index that has not trained: nothing for faiss to write yet
            record.update(dim=self._dim, metric=self._metric, kind="ivfpq", params=self._pending)
            record["search"] = ",".join(f"{key}={value}" for key, value in self._search_override.items())
            index = None
        else:
            index = self._cpu_index(cache=False)  # GPU indices cannot be written: always a CPU copy
        path = Path(folder)
        key = folder_key(path)  # resolved: an alias of the folder is the same folder
        base = (self._saved_at[1],) if self._saved_at is not None and self._saved_at[0] == key else None
        generation = write_folder(path, record, index, companions, base=base, overwrite=overwrite)
        self._saved_at = (key, generation)  # the folder it is saved to: the next save there is checked
        logger.info("Saved %s to %s", self, path)
        return path

    @classmethod
    def load(
        cls,
        folder: str | os.PathLike[str],
        gpu: GpuChoice = "auto",
        gpu_shards: bool = False,
        *,
        _multivector: bool = False,  # private: MultiVectorIndex / RerankedIndex load reads its index
    ) -> Self:
        """Load an index written by `save` (either format version); `gpu` and `gpu_shards` as in the constructor.

        dim, metric, structure and search parameters come from the faiss file; index.json adds the format
        version, the id policy and the count (checked). index.json is read first and index.faiss checked against
        the size and CRC-32 it records (folders of earlier releases record none); a save that replaces the folder
        meanwhile makes the load read it again, so it returns the index before or after that save.

        Raises:
            FileNotFoundError: if the folder lacks index.faiss or index.json.
            DamagedFileError: (a ValueError) if index.json or index.faiss is truncated, corrupted or unreadable by
                this faiss; the message names the file.
            ValueError: if index.json is malformed or disagrees with index.faiss, or the folder holds a
                `MultiVectorIndex` (load that with `MultiVectorIndex.load`).
        """

        build: Any = cls  # FaissIndex, whose constructor takes these arguments

        def restore(saved: StoredIndex | UntrainedIvfpq) -> Any:
            if isinstance(saved, UntrainedIvfpq):
                index = build(
                    saved.dim,
                    metric=saved.metric,
                    kind="ivfpq",
                    gpu=gpu,
                    gpu_shards=gpu_shards,
                    search=saved.search,
                    **saved.params,
                )
            else:
                index = build(saved.dim, saved.metric, gpu=gpu, gpu_shards=gpu_shards, _stored=saved)
            index._saved_at = (folder_key(folder), saved.generation)
            return index

        return read_folder(folder, restore, multivector=_multivector)
