"""RerankedIndex: compact codes in memory for the first pass, exact float32 scores from disk for the candidates.

A flat index keeps every vector in memory as float32 (4 × dim bytes). A `RerankedIndex` keeps a compact faiss index
(`FaissIndex` of a factory string: "PQ48", "IVF,PQ48", "SQ4", "LSH", …) in memory and the float32 vectors in an
append-only file on disk (`fair_retrieval.index.float_rows.FloatRows`, memory-mapped). A search asks the compact
index for k × `candidate_factor` candidates and scores them exactly from the float rows: the order returned is the
exact order of the candidates, so it equals a flat index's whenever the candidates hold the true top k
(`docs/compressed_window_study.md` measures how often, and what it costs).

Growth, without freezing on the first batch:
- a store of fewer than `train_at` vectors keeps them in a "Flat" index (exact; no training possible yet);
- on reaching `train_at` the compact index is trained on a sample of the exact vectors (from disk) and filled from
  them; "IVF" in `codes` is written without a list count and sized then: `index_plan.default_nlist(n)` lists,
  nprobe `index_plan.window_nprobe(nlist)` unless `nprobe` was given;
- it is trained again the same way (a new compact index from the float rows; `trainings` counts them) when the
  vectors stored reach `GROWTH` × those it was trained for.

Shrinking, without rebuilds: a remove deletes the codes in place (`remove_ids`: IVF lists, flat code arrays) and
marks the float rows dead; dead rows are dropped when the rows are compacted: by a save that rewrites the segment
holding them (every segment, once dead rows outnumber live ones), and in memory when dead rows outnumber live ones
(`FloatRows.compact`, a new working file).
Codes that faiss cannot remove from (a Refine stage, HNSW graphs) are refused.

Saving: `save` writes the float rows as immutable segments (`rows-<digest>.seg`: raw float32 rows in id order, then
their ids) and the settings (`RERANK_FILE`, which lists the segments) as companions of the compact index's commit
(`FaissIndex.save`), so they change together. A save into the folder the index came from keeps the segments there
and writes only the rows added since (merged with the newest small segments), so a small write writes little; a
remove writes no rows (the compact index's ids say which rows live). A load checks each segment against the size and
CRC-32 the commit record keeps (read once, in 1 MiB chunks: constant memory), then memory-maps that same open file
read-only, never reading it into memory. After the load a mapped file is not checked again; the library never
writes to it (a segment is never changed, only listed or dropped by a later commit).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from fair_retrieval.index.faiss_index import FaissIndex
from fair_retrieval.index.float_rows import ID_DTYPE, ROW_DTYPE, FloatRows
from fair_retrieval.index.gpu import GpuChoice, import_faiss
from fair_retrieval.index.ids import as_ids, as_vectors
from fair_retrieval.index.index_plan import default_nlist, window_nprobe
from fair_retrieval.index.inspection import METRICS, Metric
from fair_retrieval.index.persistence import FLOAT_FILE, KEPT, META_FILE, RERANK_FILE, SEGMENT_NAME, Companion
from fair_retrieval.index.selection import result_columns
from fair_retrieval.jsonio import (
    ChangedWhileReadingError,
    DamagedFileError,
    Snapshot,
    json_bytes,
    retry_while_changing,
)
from fair_retrieval.jsonio.atomic import TEMPORARY_SUFFIX
from fair_retrieval.jsonio.paths import folder_key
from fair_retrieval.validate import dimension, is_int, is_positive_int

logger = logging.getLogger(__name__)

DEFAULT_CODES = "PQ48"
"""The compact first pass a `RerankedIndex` uses unless told: 48-byte PQ codes, scanned in full. The compressed
window study's rule chose it with `DEFAULT_CANDIDATE_FACTOR` (docs/compressed_window_study.md): the only
candidate that kept document recall@10 ≥ 0.97 of the flat store and nDCG@10 within −0.005 on every set of both
models; the IVF passes lost documents in their IVF stage (a quarter of the lists visited)."""
DEFAULT_CANDIDATE_FACTOR = 16
"""Candidates scored exactly per result wanted (docs/compressed_window_study.md: 8 lost e5-small documents)."""
TRAIN_AT = 1 << 14
"""Vectors a store holds before its compact index trains (below: an exact "Flat" index)."""
MIN_TRAIN_AT = 1 << 10
"""The fewest vectors training may start at (PQ codebooks need 256 per sub-quantizer, IVF 39 per list)."""
GROWTH = 4
"""The compact index trains again once the store holds GROWTH × the vectors it was trained for."""
TRAINING_SAMPLE = 1 << 16
"""The most vectors drawn from disk to train on (k-means takes at most 256 per centroid anyway)."""
FORMAT = "fair-retrieval-reranked"
VERSION = 2
"""Settings version: 2 lists the segments of the float rows; 1 (earlier releases) had one float file."""
MAX_SETTING = 1 << 40
"""The largest number a saved settings file may give (checked before anything is built from it)."""
_REMEDY = "Rebuild the index and save it again (or restore the folder from a backup)."
_SIZED_IVF = re.compile(r"(?:^|,)IVF(?=,)")
_FIXED_IVF = re.compile(r"(?:^|,)IVF\d")
_CANNOT_REMOVE = ("Refine", "HNSW", "NSG", "RFlat")
_HAMMING = re.compile(r"(?:^|,)LSH")


class RerankedIndex:
    """A compact faiss index for candidates, re-ranked by exact float32 vectors on disk (module docstring).

    It offers what a `MultiVectorIndex` asks of its windows index (add, remove, search, get_vectors, save, load),
    so `MultiVectorIndex(dim, compressed=True)` (or a codes string) keeps its windows in one.

    Args:
        dim: vector size.
        metric: "ip" (inner product; cosine for unit vectors) or "l2".
        codes: the compact index, a faiss factory string; write "IVF" without a list count to have the lists sized
            when it trains ("IVF,PQ48", "IVF,SQ4"); others: "PQ48", "PQ96", "SQ4", "SQ8", "LSH" (binary codes,
            Hamming distance; faiss builds it for "l2" only, and its ranking is the same for either metric),
            "OPQ48,IVF,PQ48", ….
        gpu: as `FaissIndex` (the compact index; the float rows stay on disk).
        candidate_factor: candidates scored exactly per result wanted.
        train_at: vectors held before the compact index trains (below: an exact Flat index).
        nprobe: IVF lists visited per query (None: `index_plan.window_nprobe(nlist)`).
        spill_dir: the folder of the float rows' working file (None: the system's temporary folder).

    Raises:
        ValueError: codes faiss cannot build, codes with a fixed list count or a stage that cannot remove vectors,
            a metric, candidate_factor, train_at or nprobe out of range (the message says what to pass).
        TypeError: codes that are not a string.
    """

    def __init__(
        self,
        dim: int,
        metric: Metric = "ip",
        codes: str = DEFAULT_CODES,
        gpu: GpuChoice = "auto",
        *,
        candidate_factor: int = DEFAULT_CANDIDATE_FACTOR,
        train_at: int = TRAIN_AT,
        nprobe: int | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
        _compact: FaissIndex | None = None,  # private: the compact index `load` read
        _trained_for: int = 0,
    ) -> None:
        if not isinstance(codes, str):
            raise TypeError(
                f"codes must be a faiss factory string such as {DEFAULT_CODES!r}, got {type(codes).__name__}."
            )
        if metric not in METRICS:
            raise ValueError(f"metric must be 'ip' (inner product / cosine) or 'l2', got {metric!r}.")
        dimension(dim)
        self._check_codes(codes)
        self.candidate_factor = candidate_factor  # checked by the setter
        if not is_int(train_at) or train_at < MIN_TRAIN_AT:
            raise ValueError(
                f"train_at must be an int of at least {MIN_TRAIN_AT} (codebooks need that many vectors), got "
                f"{train_at!r}."
            )
        if nprobe is not None and not is_positive_int(nprobe):
            raise ValueError(f"nprobe must be a positive int or None (sized with the lists), got {nprobe!r}.")
        self._dim, self._metric, self._codes, self._gpu = int(dim), metric, codes, gpu
        self._train_at, self._nprobe = int(train_at), nprobe
        if _compact is None:
            self._check_buildable()
        self._rows = FloatRows(self._dim, spill_dir)
        self._compact = _compact if _compact is not None else FaissIndex(self._dim, metric, factory="Flat", gpu=gpu)
        self._trained_for = int(_trained_for)
        self._home: str | None = None  # the folder (`folder_key`) the segments of the float rows are in
        self.trainings = 0
        """How often the compact index was trained by this object (a counter for tests and logs)."""

    # ------------------------------------------------------------------------------------------------ properties

    @property
    def dim(self) -> int:
        """Vector size."""
        return self._dim

    @property
    def metric(self) -> Metric:
        """ "ip" or "l2"."""
        return self._metric

    @property
    def kind(self) -> str:
        """ "custom", as `FaissIndex` names an index of a factory string (a store records it, and restores such an
        index by its files)."""
        return "custom"

    @property
    def codes(self) -> str:
        """The compact index's factory string as given ("IVF" unsized)."""
        return self._codes

    @property
    def factory(self) -> str | None:
        """The factory string of the compact index in use ("Flat" until it trains)."""
        return self._compact.factory

    @property
    def params(self) -> dict[str, int]:
        """The compact index's parameters (`FaissIndex.params`) and the candidate factor."""
        return {**self._compact.params, "candidate_factor": self._candidate_factor}

    @property
    def compact(self) -> FaissIndex:
        """The compact first-pass index (a "Flat" one until the store reaches `train_at` vectors)."""
        return self._compact

    @property
    def rows(self) -> FloatRows:
        """The float32 vectors on disk."""
        return self._rows

    @property
    def trained_for(self) -> int:
        """Vectors the compact index was trained for (0: not trained yet, a Flat index)."""
        return self._trained_for

    @property
    def train_at(self) -> int:
        """Vectors held before the compact index trains."""
        return self._train_at

    @property
    def candidate_factor(self) -> int:
        """Candidates scored exactly per result wanted (settable)."""
        return self._candidate_factor

    @candidate_factor.setter
    def candidate_factor(self, value: int) -> None:
        if not is_positive_int(value, numpy=True):
            raise ValueError(
                f"candidate_factor must be a positive int (e.g. {DEFAULT_CANDIDATE_FACTOR}), got {value!r}."
            )
        self._candidate_factor = int(value)

    @property
    def is_trained(self) -> bool:
        """Always True: an index too small to train searches exactly."""
        return True

    @property
    def on_gpu(self) -> bool:
        """Whether the compact index is on a GPU."""
        return self._compact.on_gpu

    @property
    def ids(self) -> np.ndarray:
        """The stored ids, int64, ascending (a copy)."""
        return self._compact.ids

    @property
    def memory_bytes(self) -> int:
        """Bytes of vector data this index keeps in memory: the compact index as faiss writes it (codes, ids,
        centroids) and the float rows' id table. Not counted: faiss' id lookup tables and the id set of the
        `FaissIndex`, which every `FaissIndex` keeps."""
        faiss = self._compact._faiss
        return int(faiss.serialize_index(self._compact._cpu_index(cache=False)).size) + self._rows.memory_bytes

    def __len__(self) -> int:
        return len(self._compact)

    def __contains__(self, id_: object) -> bool:
        return id_ in self._compact

    def __repr__(self) -> str:
        return (
            f"RerankedIndex(dim={self._dim}, metric={self._metric!r}, codes={self._codes!r}, count={len(self)}, "
            f"compact={self.factory!r}, candidate_factor={self._candidate_factor})"
        )

    # ------------------------------------------------------------------------------------------------ changing

    def add(self, vectors: Any, ids: Any = None) -> np.ndarray:
        """Add vectors (n, dim) under `ids`, which must ascend past every stored id (None: the next ids after the
        largest stored one, as `FaissIndex.add` gives them; an id removed from the end is given again).

        The vectors go to the float rows and their codes to the compact index; the compact index trains when the
        store reaches `train_at` vectors, and again at `GROWTH` × what it was trained for.

        Raises:
            ValueError: malformed vectors, a count that differs from the ids', ids that do not ascend past the
                stored ones. Nothing is stored then.
            TypeError: non-numeric vectors or ids.
        """
        matrix = as_vectors(vectors, "vectors", self._dim)
        if ids is None:
            start = int(self._compact.ids.max(initial=-1)) + 1
            new_ids = np.arange(start, start + matrix.shape[0], dtype=np.int64)
        else:
            new_ids = as_ids(ids, "ids")
        if new_ids.shape != (matrix.shape[0],):
            raise ValueError(f"Got {matrix.shape[0]} vectors but {new_ids.size} ids; pass one id per vector.")
        if matrix.shape[0] == 0:
            return new_ids
        self._rows.append(new_ids, matrix)  # checks the ids ascend before anything is stored
        held = len(self._rows)
        if (self._trained_for == 0 and held >= self._train_at) or (
            self._trained_for and held >= GROWTH * self._trained_for
        ):
            self._train()
        else:
            self._compact.add(matrix, ids=new_ids)
        return new_ids

    def train(self, sample: Any) -> None:
        """Train the compact index on `sample` now, before any vector is added (e.g. on a sample of a corpus to
        come); it trains again at `GROWTH` × len(sample) vectors.

        Raises:
            ValueError: if the index holds vectors, or the sample is malformed or smaller than `MIN_TRAIN_AT`.
        """
        matrix = as_vectors(sample, "sample", self._dim)
        if len(self):
            raise ValueError(f"train() takes an empty index; this one holds {len(self)} vectors (it trains itself).")
        if matrix.shape[0] < MIN_TRAIN_AT:
            raise ValueError(f"train() needs at least {MIN_TRAIN_AT} vectors, got {matrix.shape[0]}.")
        self._compact = self._trained_compact(matrix, self._compact)
        self._trained_for = matrix.shape[0]

    def remove(self, ids: Any) -> int:
        """Remove the vectors of `ids` from the compact index (in place) and mark their float rows dead.

        Raises:
            ValueError: if some ids are not stored (nothing is removed then).
        """
        targets = np.unique(as_ids(ids, "ids"))
        if targets.size == 0:
            return 0
        removed = self._compact.remove(targets)
        self._rows.discard(targets)
        if self._rows.dead > len(self._rows) and self._rows.dead >= MIN_TRAIN_AT:
            self._rows.compact()
        return removed

    def set_search(self, search: str | dict[str, float]) -> None:
        """Search parameters of the compact index by their faiss names (`FaissIndex.set_search`), e.g. "nprobe=64";
        a retraining keeps an nprobe set here."""
        self._compact.set_search(search)
        values = search if isinstance(search, dict) else dict(part.split("=") for part in search.split(","))
        if "nprobe" in values:
            self._nprobe = int(float(values["nprobe"]))

    # ------------------------------------------------------------------------------------------------ reading

    def get_vectors(self, ids: Any) -> np.ndarray:
        """The exact float32 vectors of `ids` (read from disk), (n, dim), in the order asked.

        Raises:
            ValueError: if some ids are not stored.
        """
        wanted = as_ids(ids, "ids")
        return self._rows.get(wanted)

    def search(self, queries: Any, k: int, *, ids: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The k best stored vectors for every query row by their exact scores, optionally only among `ids`.

        The compact index gives k × `candidate_factor` candidates (restricted to `ids` inside faiss, as
        `FaissIndex.search`); their float32 vectors are read from disk and scored exactly. Until the index trains
        the compact index is flat and the search exact.

        Returns:
            (scores, ids) as `FaissIndex.search`: float32 and int64 (n, c), best first, c = `result_columns(k,
            len(self))`; -1 ids and -inf ("ip") / +inf ("l2") scores where fewer are found.

        Raises:
            ValueError: a k that is not a positive int, malformed queries, or `ids` that are not stored.
        """
        if not is_positive_int(k, numpy=True):
            raise ValueError(f"k must be a positive int, got {k!r}.")
        if self._trained_for == 0:
            return self._compact.search(queries, k, ids=ids)
        matrix = as_vectors(queries, "queries", self._dim)
        width = result_columns(int(k), len(self))
        fetch = min(len(self), int(k) * self._candidate_factor)
        missing = float("-inf") if self._metric == "ip" else float("inf")
        scores = np.full((matrix.shape[0], width), missing, dtype=np.float32)
        found = np.full((matrix.shape[0], width), -1, dtype=np.int64)
        if matrix.shape[0] == 0 or fetch == 0:
            return scores, found
        _, candidates = self._compact.search(matrix, fetch, ids=ids)
        for row in range(matrix.shape[0]):
            chosen = np.sort(candidates[row][candidates[row] >= 0])  # in id order, as a flat index: ties break alike
            if chosen.size == 0:
                continue
            best, order = self._exact_top(matrix[row], self._rows.get(chosen), min(width, int(k)))
            scores[row, : order.size], found[row, : order.size] = best, chosen[order]
        return scores, found

    # ------------------------------------------------------------------------------------------------ persistence

    def save(
        self,
        folder: str | os.PathLike[str],
        *,
        companions: Mapping[str, Companion] | None = None,
        overwrite: bool = False,
    ) -> Path:
        """Write the compact index, the float rows and the settings into `folder` in one commit (`FaissIndex.save`:
        atomic, `companions` in the same commit, conflicts refused as there).

        The float rows are segments (`fair_retrieval.index.float_rows`): a save into the folder this index was
        loaded from or last saved to keeps the segments there and writes the rows added since as a new one, merged
        with the newest segments while those are no larger than what it holds (`_rewritten_from`: each row is
        rewritten about log2 of the store's size times over its life, and a folder holds about that many
        segments); a save elsewhere, or one where dead rows outnumber live ones, writes every live row as one
        segment. The new segment is written under a temporary name and memory-mapped before the commit; once the
        commit succeeds it becomes rows of this index (the working file is deleted), so memory stays compact.
        """
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        key = folder_key(path)
        kept = self._rewritten_from(key)
        segments = self._rows.segments[:kept]
        start = self._rows.segment_starts[kept]
        new: list[tuple[str, Path, np.ndarray]] = []  # (name, temporary file, ids) of the segment written, if any
        try:
            if self._rows.live_from(start):
                new.append(self._write_segment(path, start))
            listed = [*segments, *((name, int(ids.size)) for name, _, ids in new)]
            mapped = [(name, _mapped(staged, int(ids.size), self._dim)) for name, staged, ids in new]
            settings = json_bytes(
                {**self._settings(), "segments": [{"name": n, "rows": r} for n, r in listed]}, indent=None
            )
            files: dict[str, Companion] = {**{name: KEPT for name, _ in segments}, **{n: f for n, f, _ in new}}
            self._compact.save(
                path, companions={**(companions or {}), **files, RERANK_FILE: settings}, overwrite=overwrite
            )
        except BaseException:
            for _, staged, _ in new:
                staged.unlink(missing_ok=True)  # moved by the save; still here only if it failed
            raise
        ids = np.concatenate([ids for _, _, ids in new]) if new else np.zeros(0, dtype=np.int64)
        self._rows.replace_segments(kept, mapped, ids)
        self._home = key
        logger.debug("Saved the float rows as %d segment(s), %d kept.", len(listed), kept)
        return path

    def _rewritten_from(self, key: str) -> int:
        """How many of the saved segments a save into the folder `key` keeps as they are (the rest, and the rows
        added since, are written as one new segment)."""
        saved_at = self._compact._saved_at
        if self._home != key or saved_at is None or saved_at[0] != key or self._rows.dead > len(self._rows):
            return 0  # another folder, or mostly dead rows: every live row is written again
        segments, starts = self._rows.segments, self._rows.segment_starts
        kept = len(segments)
        held = self._rows.live_from(starts[kept])
        while kept and held and segments[kept - 1][1] <= held:  # merge the newest segments no larger than the new
            kept -= 1
            held += self._rows.live_from(starts[kept]) - self._rows.live_from(starts[kept + 1])
        return kept

    def _write_segment(self, path: Path, start: int) -> tuple[str, Path, np.ndarray]:
        """Write the live rows from row `start` on as a segment in `path`, under a temporary name: (the segment's
        name, named by its content, the temporary file, its ids)."""
        staged = path / f"rows-{uuid.uuid4().hex}.seg{TEMPORARY_SUFFIX}"  # a killed save's is removed by the next
        with open(staged, "wb") as handle:
            digesting = _Digesting(handle)
            ids = self._rows.write_rows(digesting, start)
            handle.flush()
            os.fsync(handle.fileno())
        return f"rows-{digesting.hexdigest()}.seg", staged, ids

    @classmethod
    def load(cls, folder: str | os.PathLike[str], gpu: GpuChoice = "auto") -> RerankedIndex:
        """Load an index written by `save` (read again if a save replaces the folder meanwhile).

        The settings and the segments are checked against the sizes and CRC-32s of the commit record (each read
        once, in 1 MiB chunks), the segments' ids against the compact index's (a row for each), and the segments
        are then memory-mapped from the same open files, read-only: they are not read into memory. A folder of an
        earlier release (one float file, `FLOAT_FILE`) loads as one segment; the next save writes segments.

        Raises:
            FileNotFoundError: if the folder holds no index.
            DamagedFileError: (a ValueError) a truncated, corrupted or malformed file, or segments that do not
                hold one row per stored id; the message names the file.
            ValueError: the folder holds another kind of index.
        """
        path = Path(folder)

        def attempt() -> RerankedIndex:
            record = Snapshot.read(path / META_FILE)
            if not record.lists(RERANK_FILE):
                raise ValueError(
                    f"{path} holds no {RERANK_FILE}: it is not a RerankedIndex folder (load it with FaissIndex.load "
                    "or MultiVectorIndex.load)."
                )
            index = cls.read(path, record, gpu)
            if not record.is_current():
                raise ChangedWhileReadingError
            return index

        return retry_while_changing(path / META_FILE, attempt)

    @classmethod
    def read(cls, folder: str | os.PathLike[str], record: Snapshot, gpu: GpuChoice = "auto") -> RerankedIndex:
        """The index in `folder` as its commit record `record` (one reading of it) lists it: `load` without the
        retry, for a caller that reads other files of the same commit (`MultiVectorIndex.load`).

        Raises:
            As `load`; ChangedWhileReadingError when a save replaced the folder meanwhile (the caller reads again).
        """
        path = Path(folder)
        settings = _read_settings(record, path / RERANK_FILE)
        compact = FaissIndex.load(path, gpu=gpu, _multivector=True)
        if compact.dim > MAX_SETTING:  # pragma: no cover - faiss would not have read it
            raise DamagedFileError(path / RERANK_FILE, "its index is too large", _REMEDY)
        if settings["version"] == 1:  # an earlier release's one float file: the rows of the index's ids
            segments = [(FLOAT_FILE, _read_float_file(record, path, compact.dim, compact.ids.size))]
            ids, live = compact.ids, None
        else:
            segments, ids = _read_segments(record, path, settings["segments"], compact.dim)
            live = np.isin(ids, compact.ids)
            if int(np.count_nonzero(live)) != compact.ids.size:
                raise DamagedFileError(
                    path / RERANK_FILE,
                    f"its segments hold rows for {int(np.count_nonzero(live))} of the {compact.ids.size} vectors of "
                    "the index",
                    _REMEDY,
                )
        try:
            index = cls(
                compact.dim,
                settings["metric"],
                settings["codes"],
                gpu,
                candidate_factor=settings["candidate_factor"],
                train_at=settings["train_at"],
                nprobe=settings["nprobe"],
                _compact=compact,
                _trained_for=settings["trained_for"],
            )
        except (TypeError, ValueError) as error:
            raise DamagedFileError(path / RERANK_FILE, f"its settings are refused ({error})", _REMEDY) from None
        index._rows.rebase([(name, rows) for name, rows in segments if rows is not None], ids, live)
        index._home = folder_key(path) if settings["version"] > 1 else None  # an old float file is never kept
        return index

    # ------------------------------------------------------------------------------------------------ internals

    def _settings(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "codes": self._codes,
            "metric": self._metric,
            "candidate_factor": self._candidate_factor,
            "train_at": self._train_at,
            "nprobe": self._nprobe,
            "trained_for": self._trained_for,
        }

    def _exact_top(self, query: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k best of `vectors` for `query` by exact scores, best first: (scores, positions in `vectors`).

        Scored by a faiss flat index of the candidates, so each score is computed by the same kernel, bit for bit,
        as a flat `FaissIndex` scores it for a single query: windows of one text kept twice (whose vectors differ
        in their last bits) come back in the flat index's order, not the order of another summation.
        """
        faiss = import_faiss()
        scorer = faiss.IndexFlatIP(self._dim) if self._metric == "ip" else faiss.IndexFlatL2(self._dim)
        scorer.add(np.ascontiguousarray(vectors, dtype=np.float32))
        best, positions = scorer.search(query[None, :], min(k, vectors.shape[0]))
        keep = positions[0] >= 0
        return best[0][keep], positions[0][keep]

    def _train(self) -> None:
        """A new compact index trained on a sample of the float rows and filled from them."""
        sample = self._rows.sample(TRAINING_SAMPLE)
        compact = self._trained_compact(sample, self._compact)
        for block_ids, vectors in self._rows.blocks():
            compact.add(vectors, ids=block_ids)
        self._compact, self._trained_for = compact, len(self._rows)

    def _trained_compact(self, sample: np.ndarray, previous: FaissIndex) -> FaissIndex:
        """An empty compact index of `codes`, its IVF lists sized by `sample`, trained on it."""
        count = sample.shape[0]
        nlist = default_nlist(count)
        factory = _SIZED_IVF.sub(lambda match: match.group(0).replace("IVF", f"IVF{nlist}"), self._codes)
        compact = FaissIndex(self._dim, self._compact_metric, factory=factory, gpu=self._gpu)
        if not compact.is_trained:  # LSH without thresholds has nothing to learn
            compact.train(sample)
        if "nlist" in compact.params:
            compact.set_search({"nprobe": self._nprobe or window_nprobe(compact.params["nlist"])})
        compact._saved_at = previous._saved_at  # the folder it was loaded from or saved to: saves there stay checked
        self.trainings += 1
        logger.info("Trained the compact index %s on %d vectors.", factory, count)
        return compact

    def _check_codes(self, codes: str) -> None:
        if not codes.strip():
            raise ValueError(f"codes must be a faiss factory string such as {DEFAULT_CODES!r}, got an empty one.")
        if _FIXED_IVF.search(codes):
            raise ValueError(
                f"codes {codes!r} fixes the IVF list count; write 'IVF' alone (e.g. 'IVF,PQ48'): the lists are "
                "sized by the vectors when the index trains."
            )
        stage = next((name for name in _CANNOT_REMOVE if name in codes), None)
        if stage is not None:
            raise ValueError(
                f"codes {codes!r} has a {stage} stage, from which faiss cannot remove vectors (every delete would "
                "rebuild the index); the exact re-rank from disk replaces a refinement: use e.g. 'IVF,PQ48'."
            )

    def _check_buildable(self) -> None:
        """Build the codes once now (with one list for "IVF"), so a factory faiss refuses fails here."""
        factory = _SIZED_IVF.sub(lambda match: match.group(0).replace("IVF", "IVF1"), self._codes)
        FaissIndex(self._dim, self._compact_metric, factory=factory, gpu=False)

    @property
    def _compact_metric(self) -> Metric:
        """The trained compact index's metric: the index's, but "l2" for binary codes (faiss builds LSH for "l2"
        only; Hamming distance ranks the candidates the same for either metric)."""
        return "l2" if _HAMMING.search(self._codes) else self._metric


def _mapped(source: Any, rows: int, dim: int) -> np.ndarray | None:
    """A read-only memory map of `rows` float32 rows of `dim` in `source` (a path or an open file); None for none."""
    if rows == 0:
        return None
    return np.memmap(source, dtype=ROW_DTYPE, mode="r", shape=(rows, dim))


class _Digesting:
    """A binary file that also hashes what is written to it (the name of a segment is its content's digest)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle, self._hash = handle, hashlib.blake2b(digest_size=16)

    def write(self, data: bytes) -> int:
        self._hash.update(data)
        return self._handle.write(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def _read_float_file(record: Snapshot, path: Path, dim: int, count: int) -> np.ndarray | None:
    """The float file of an earlier release (`FLOAT_FILE`: the rows of the index's `count` ids, no ids), checked
    against the record and mapped."""
    with record.open(FLOAT_FILE) as handle:
        _check_listed(record, FLOAT_FILE, handle, path)
        expected = count * dim * ROW_DTYPE.itemsize
        size = record.files[FLOAT_FILE]["bytes"]
        if size != expected:
            raise DamagedFileError(
                path / FLOAT_FILE,
                f"it holds {size} bytes, not one float32 row of {dim} values for each of the {count} vectors of the "
                f"index ({expected} bytes)",
                _REMEDY,
            )
        return _mapped(handle, count, dim)


def _read_segments(
    record: Snapshot, path: Path, listed: list[dict[str, Any]], dim: int
) -> tuple[list[tuple[str, np.ndarray | None]], np.ndarray]:
    """The segments the settings list, checked against the record (size and CRC-32), mapped, with every row's id
    (which must ascend across them)."""
    segments: list[tuple[str, np.ndarray | None]] = []
    ids: list[np.ndarray] = []
    for entry in listed:
        name, rows = entry["name"], entry["rows"]
        with record.open(name) as handle:
            _check_listed(record, name, handle, path)
            size = record.files[name]["bytes"]
            if size != rows * (dim * ROW_DTYPE.itemsize + ID_DTYPE.itemsize):
                raise DamagedFileError(
                    path / name,
                    f"it holds {size} bytes, not {rows} float32 rows of {dim} values and their ids",
                    _REMEDY,
                )
            handle.seek(rows * dim * ROW_DTYPE.itemsize)
            ids.append(np.frombuffer(handle.read(rows * ID_DTYPE.itemsize), dtype=ID_DTYPE).astype(np.int64))
            handle.seek(0)
            segments.append((name, _mapped(handle, rows, dim)))
    every = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    if every.size > 1 and not bool(np.all(np.diff(every) > 0)):
        raise DamagedFileError(path / RERANK_FILE, "its segments' ids do not ascend (edited or crafted)", _REMEDY)
    return segments, every


def _check_listed(record: Snapshot, name: str, handle: IO[bytes], path: Path) -> None:
    """Refuse a file that differs from the size and CRC-32 its record gives it."""
    problem = record.mismatch(name, handle)
    if problem is not None:
        if not record.is_current():
            raise ChangedWhileReadingError
        raise DamagedFileError(path / name, f"{problem} (truncated, corrupted or replaced)", _REMEDY)


def _read_settings(record: Snapshot, path: Path) -> dict[str, Any]:
    """The settings file as `record` lists it, checked (size and CRC-32, then every field's type and bound)."""
    with record.open(RERANK_FILE) as handle:
        problem, raw = record.mismatch(RERANK_FILE, handle), handle.read()
    if problem is not None:
        if not record.is_current():
            raise ChangedWhileReadingError
        raise DamagedFileError(path, problem, _REMEDY)
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") not in (1, VERSION):
            raise ValueError(f"not a {FORMAT} file of version 1 to {VERSION}")
        if data["version"] > 1:
            _check_segment_list(data["segments"], record)
        codes = data["codes"]
        if not isinstance(codes, str) or not 0 < len(codes) <= 200:
            raise ValueError(f"its 'codes' {codes!r} is not a factory string")
        if data["metric"] not in METRICS:
            raise ValueError(f"its 'metric' {data['metric']!r} is not one of {METRICS}")
        for field in ("candidate_factor", "train_at", "trained_for", "nprobe"):
            value = data[field]
            least = 0 if field == "trained_for" else 1
            if not (value is None and field == "nprobe") and not (is_int(value) and least <= value <= MAX_SETTING):
                raise ValueError(f"its {field!r} {value!r} is not an integer from {least} to {MAX_SETTING}")
    except (KeyError, TypeError, ValueError) as error:
        raise DamagedFileError(path, f"its settings cannot be read ({error})", _REMEDY) from error
    return data


def _check_segment_list(listed: Any, record: Snapshot) -> None:
    """Refuse a segment list that is not [{"name": a segment name the record lists, "rows": a count}, …]."""
    if not isinstance(listed, list):
        raise ValueError(f"its 'segments' {listed!r} is not a list")
    for entry in listed:
        if not isinstance(entry, dict) or set(entry) != {"name", "rows"}:
            raise ValueError(f"a segment entry {entry!r} is not {{'name': …, 'rows': …}}")
        name, rows = entry["name"], entry["rows"]
        if not isinstance(name, str) or not SEGMENT_NAME.fullmatch(name) or not record.lists(name):
            raise ValueError(f"the segment {name!r} is not a segment its record lists")
        if not is_int(rows) or not 0 < rows <= MAX_SETTING:
            raise ValueError(f"the segment {name} gives {rows!r} rows, not an integer from 1 to {MAX_SETTING}")
