"""plan_index: which FAISS index to build for a corpus of a given size, and with which parameters.

Small corpora get an exact flat index: it needs no training and fits in memory. Above `flat_limit` vectors the plan
is IVF-PQ (optionally with an OPQ rotation), with parameters from common FAISS guidance:

- nlist: the power of two nearest 4·√n (faiss suggests 4·√n to 16·√n lists), at most n/39 so every list gets the
  39 training points faiss' k-means asks for;
- nprobe: nlist/16 (at least 8): lists visited per query, the recall/speed knob that can be changed after building;
- m: the largest number of PQ sub-quantizers ≤ dim/2 that divides dim and that faiss' GPU IVF-PQ supports with the
  float32 lookup tables FaissIndex uses (m·2^nbits ≤ 16384, so m ≤ 64 with 8-bit codes), so an index built on CPU
  also runs on a GPU (384-d: m = 64, 6 dimensions per 8-bit code, 24× smaller than float32);
- training sample: 39·max(nlist, 256) vectors (k-means for the lists and for 256-centroid PQ codebooks).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Literal

logger = logging.getLogger(__name__)

PlanKind = Literal["auto", "flat", "ivfpq"]
FLAT_LIMIT = 1_000_000
POINTS_PER_CENTROID = 39
GPU_PQ_SUBQUANTIZERS = (1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96)
GPU_PQ_SUBDIMENSIONS = (1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 28, 32)
GPU_FLOAT32_TABLE_ENTRIES = 16_384  # m · 2^nbits above this needs float16 lookup tables on GPU
_IVFPQ_KEYS = ("nlist", "nprobe", "m", "nbits")


@dataclass(frozen=True)
class IndexPlan:
    """An index to build.

    Attributes:
        kind: "flat" (exact) or "ivfpq" (compressed; trained on a sample).
        params: FaissIndex parameters (nlist, nprobe, m, nbits for ivfpq; empty for flat).
        opq: rotate vectors with OPQ before IVF-PQ (better codes for correlated dimensions; slower training).
        train_size: vectors in the training sample (0 for flat).
    """

    kind: Literal["flat", "ivfpq"]
    params: dict[str, int] = field(default_factory=dict)
    opq: bool = False
    train_size: int = 0

    def describe(self) -> str:
        """A one-line summary for logs and the CLI."""
        if self.kind == "flat":
            return "flat (exact)"
        values = ", ".join(f"{key}={value}" for key, value in self.params.items())
        return f"{'OPQ+' if self.opq else ''}IVF-PQ ({values}; trained on {self.train_size} vectors)"


def plan_index(
    count: int,
    dim: int,
    kind: PlanKind = "auto",
    *,
    flat_limit: int = FLAT_LIMIT,
    opq: bool = False,
    train_size: int | None = None,
    **params: int,
) -> IndexPlan:
    """Choose the index for `count` vectors of size `dim`.

    Args:
        count: number of vectors to index.
        dim: vector size.
        kind: "auto" (flat up to `flat_limit` vectors, IVF-PQ above), "flat" or "ivfpq".
        flat_limit: the largest corpus "auto" keeps exact.
        opq: add an OPQ rotation to IVF-PQ.
        train_size: training sample size (default 39·max(nlist, 2**nbits), capped at `count`).
        **params: IVF-PQ overrides: nlist, nprobe, m, nbits.

    Raises:
        ValueError: bad counts or kinds, parameters for a flat index, or IVF-PQ parameters that cannot work.
    """
    for name, value in (("count", count), ("dim", dim), ("flat_limit", flat_limit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name != "dim" else 1):
            raise ValueError(f"{name} must be a non-negative int, got {value!r}.")
    if kind not in ("auto", "flat", "ivfpq"):
        raise ValueError(f"kind must be 'auto', 'flat' or 'ivfpq', got {kind!r}.")
    unknown = sorted(set(params) - set(_IVFPQ_KEYS))
    if unknown:
        raise ValueError(f"Unknown index parameter(s) {unknown}; IVF-PQ takes {list(_IVFPQ_KEYS)}.")
    chosen = kind if kind != "auto" else ("flat" if count <= flat_limit else "ivfpq")
    if chosen == "flat":
        if params or opq:
            raise ValueError(
                f"A flat index takes no IVF-PQ parameters or OPQ (got {sorted(params) + (['opq'] if opq else [])}); "
                f"pass kind='ivfpq'{' or a smaller flat_limit' if kind == 'auto' else ''}."
            )
        return IndexPlan(kind="flat")
    resolved = _ivfpq_params(count, dim, params)
    needed = max(resolved["nlist"], 2 ** resolved["nbits"])
    size = train_size if train_size is not None else POINTS_PER_CENTROID * needed
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"train_size must be a positive int, got {train_size!r}.")
    size = min(size, count)
    if size < needed:
        raise ValueError(
            f"IVF-PQ with nlist={resolved['nlist']}, nbits={resolved['nbits']} needs at least {needed} training "
            f"vectors, but only {size} are available; use kind='flat' for {count} vectors, or lower nlist / nbits."
        )
    return IndexPlan(kind="ivfpq", params=resolved, opq=bool(opq), train_size=size)


def default_nlist(count: int) -> int:
    """The power of two nearest 4·√count, at most count/39 (≥ 1)."""
    target = 4 * math.sqrt(max(count, 1))
    nlist = 2 ** round(math.log2(target))
    while nlist > 1 and nlist * POINTS_PER_CENTROID > count:
        nlist //= 2
    return max(1, nlist)


def default_subquantizers(dim: int, nbits: int = 8) -> int:
    """The largest m ≤ dim/2 dividing dim that faiss' GPU IVF-PQ runs with float32 lookup tables; without one, the
    largest divisor of dim ≤ min(dim/2, 16384/2^nbits)."""
    limit = max(1, GPU_FLOAT32_TABLE_ENTRIES // 2**nbits)
    for m in sorted(GPU_PQ_SUBQUANTIZERS, reverse=True):
        if m <= min(limit, max(1, dim // 2)) and dim % m == 0 and dim // m in GPU_PQ_SUBDIMENSIONS:
            return m
    fallback = max(m for m in range(1, min(max(1, dim // 2), limit) + 1) if dim % m == 0)
    logger.info(
        "No GPU-compatible PQ size divides dim=%d; using m=%d (the index may not move to a GPU).", dim, fallback
    )
    return fallback


def _ivfpq_params(count: int, dim: int, given: dict[str, int]) -> dict[str, int]:
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}.")
    nlist = given.get("nlist", default_nlist(count))
    nbits = given.get("nbits", 8)
    params = {
        "nlist": nlist,
        "nprobe": given.get("nprobe", min(nlist, max(8, nlist // 16))),
        "m": given.get("m", default_subquantizers(dim, nbits)),
        "nbits": nbits,
    }
    if params["nprobe"] > nlist:
        raise ValueError(f"nprobe={params['nprobe']} exceeds nlist={nlist}; use nprobe ≤ nlist.")
    if dim % params["m"]:
        raise ValueError(f"m={params['m']} PQ sub-quantizers must divide dim={dim}.")
    return params
