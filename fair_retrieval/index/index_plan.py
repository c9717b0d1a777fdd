"""Index plans: which faiss index to build (an index-factory string) and how to search it (ParameterSpace values).

One plan serves `FaissIndex` and `fair_retrieval.distributed.build_index`:

- the named kinds map to factory strings: flat → "Flat", hnsw → "HNSW{M}", ivf → "IVF{nlist},Flat",
  ivfpq with explicit nlist/m/nbits → "IVF{nlist},PQ{m}x{nbits}";
- `sized_ivfpq(count, dim)` is the compressed default, sized to the number of training vectors:
  "IVF{nlist},PQ{m}x8,Refine(SQ8)". The IVF-PQ stage finds k·k_factor candidates fast from small codes; the
  refinement re-ranks them with 8-bit scalar codes (one byte per dimension, a quarter of float32), which brings
  recall@10 back to ≥ 0.95 of exact search (measured in benchmarks/index_recall.py) while the stored index stays
  near 30% of a flat float32 one.

Sizing rules of the default (common faiss guidance, checked by the benchmark; the numbers are the constants below):
- nlist: the power of two nearest 4·√n, at most n/POINTS_PER_CENTROID so every list gets the training points
  k-means asks for;
- nprobe: nlist/NPROBE_SHARE, at least MIN_NPROBE (lists visited per query); an index of window vectors
  (`MultiVectorIndex`) visits nlist/WINDOW_NPROBE_SHARE when nprobe was not chosen (`window_nprobe`);
- m: about dim/DIMENSIONS_PER_CODE PQ sub-quantizers (one byte code each) dividing dim, from the sizes faiss' GPU
  IVF-PQ runs (GPU_PQ_SUBQUANTIZERS; 384-d → 48 bytes);
- k_factor: REFINE_K_FACTOR candidates per wanted result go to the refinement.

The named kinds' default parameters are KIND_PARAMS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from fair_retrieval.validate import is_positive_int

POINTS_PER_CENTROID = 39  # faiss' k-means warns below this many training points per centroid
PQ_CODEBOOK_BITS = 8
GPU_PQ_SUBQUANTIZERS = (1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96)
GPU_PQ_SUBDIMENSIONS = (1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 28, 32)
DIMENSIONS_PER_CODE = 8
REFINE_K_FACTOR = 16
MIN_NPROBE = 16
NPROBE_SHARE = 8  # nprobe = nlist / NPROBE_SHARE
# A multi-vector index ranks documents by their windows: at nlist/8 the sized IVF-PQ kept document recall@10 0.939 of
# flat (real MiniLM windows, 256 lists; more over-fetch changed nothing), at nlist/4 0.967 (docs/multivector_study.md).
WINDOW_NPROBE_SHARE = 4

Kind = Literal["flat", "hnsw", "ivf", "ivfpq"]
"""The named index kinds (a faiss factory string builds any other index)."""
KINDS: tuple[str, ...] = get_args(Kind)

KIND_PARAMS: dict[str, dict[str, int]] = {
    "flat": {},
    "hnsw": {"M": 32, "ef_construction": 40, "ef_search": 64},
    "ivf": {"nlist": 100, "nprobe": 8},
    "ivfpq": {"nlist": 100, "nprobe": 8, "m": 8, "nbits": 8},  # used only for what an explicit plan leaves out
}
STRUCTURAL_IVFPQ = ("nlist", "m", "nbits")


@dataclass(frozen=True)
class IndexPlan:
    """A faiss index to build and how to search it.

    Attributes:
        kind: "flat", "hnsw", "ivf", "ivfpq" (also the sized default), or "custom" for any other factory string.
        factory: the faiss index-factory string (without an id map: FaissIndex adds `IDMap2` when needed).
        search: ParameterSpace values applied after building and loading, e.g. {"nprobe": 64, "k_factor_rf": 16}.
        build: construction-time values (HNSW's efConstruction).
        params: the plan in FaissIndex's parameter names (nlist, nprobe, m, nbits, k_factor, M, …), for logs and
            manifests.
        train_size: training vectors the plan was sized for (0: no training).
    """

    kind: str
    factory: str
    search: dict[str, float] = field(default_factory=dict)
    build: dict[str, int] = field(default_factory=dict)
    params: dict[str, int] = field(default_factory=dict)
    train_size: int = 0

    @property
    def needs_training(self) -> bool:
        """Whether faiss must train this index (inverted lists, codebooks) before adding vectors."""
        return any(token.startswith(("IVF", "PQ", "OPQ", "SQ", "LSH", "RR", "PCA")) for token in _tokens(self.factory))

    def search_string(self) -> str:
        """The search values as a ParameterSpace string ("nprobe=64,k_factor_rf=16"; "" for none)."""
        return ",".join(f"{key}={_number(value)}" for key, value in self.search.items())

    def describe(self) -> str:
        """A one-line summary for logs and the CLI."""
        extra = f" [{self.search_string()}]" if self.search else ""
        trained = f" (sized for {self.train_size} training vectors)" if self.train_size else ""
        return f"{self.factory}{extra}{trained}"


def kind_plan(kind: str, dim: int, **params: int) -> IndexPlan:
    """The plan of a named kind with explicit parameters (defaults filled in), as FaissIndex always built them.

    For "ivfpq" this is plain IVF-PQ without refinement; `sized_ivfpq` is the default when no structural parameter
    (nlist, m, nbits) is given.

    Raises:
        ValueError: an unknown kind, bad values, or m not dividing dim.
        TypeError: parameters the kind does not take.
    """
    if kind not in KIND_PARAMS:
        raise ValueError(f"kind must be one of {tuple(KIND_PARAMS)}, got {kind!r}.")
    p = _resolve(kind, params)
    if "nlist" in p and "nprobe" not in params:
        p["nprobe"] = min(p["nprobe"], p["nlist"])
    if kind == "flat":
        return IndexPlan("flat", "Flat")
    if kind == "hnsw":
        return IndexPlan(
            "hnsw",
            f"HNSW{p['M']}",
            search={"efSearch": p["ef_search"]},
            build={"efConstruction": p["ef_construction"]},
            params=p,
        )
    _check_nprobe(p)
    if kind == "ivf":
        return IndexPlan("ivf", f"IVF{p['nlist']},Flat", search={"nprobe": p["nprobe"]}, params=p)
    _check_pq(dim, p["m"], p["nbits"])
    return IndexPlan("ivfpq", f"IVF{p['nlist']},PQ{p['m']}x{p['nbits']}", search={"nprobe": p["nprobe"]}, params=p)


def sized_ivfpq(count: int, dim: int, *, nprobe: int | None = None, k_factor: int | None = None) -> IndexPlan:
    """The compressed default for `count` training vectors of size `dim`: IVF-PQ with an SQ8 refinement stage.

    Args:
        count: training vectors (for a corpus built in one go, its size).
        dim: vector size.
        nprobe: override the lists visited per query.
        k_factor: override the candidates per result that the refinement re-ranks.

    Raises:
        ValueError: fewer than 2^8 vectors (PQ codebooks need them), or bad overrides.
    """
    minimum = 2**PQ_CODEBOOK_BITS
    if count < minimum:
        raise ValueError(
            f"The sized IVF-PQ index needs at least {minimum} training vectors, got {count}; use kind='flat' for "
            "so few vectors, or pass nlist/m/nbits explicitly."
        )
    nlist = default_nlist(count)
    m = default_subquantizers(dim)
    probes = nprobe if nprobe is not None else min(nlist, max(MIN_NPROBE, nlist // NPROBE_SHARE))
    factor = k_factor if k_factor is not None else REFINE_K_FACTOR
    params = {"nlist": nlist, "nprobe": probes, "m": m, "nbits": PQ_CODEBOOK_BITS, "k_factor": factor}
    _check_positive(params)
    _check_nprobe(params)
    return IndexPlan(
        "ivfpq",
        f"IVF{nlist},PQ{m}x{PQ_CODEBOOK_BITS},Refine(SQ8)",
        search={"nprobe": probes, "k_factor_rf": factor},
        params=params,
        train_size=count,
    )


def window_nprobe(nlist: int) -> int:
    """The lists an IVF index of window vectors visits per query when its nprobe was not chosen.

    A document is found by its best window(s), so a window missed by the IVF stage can lose the whole document;
    visiting nlist/WINDOW_NPROBE_SHARE lists (at least MIN_NPROBE) keeps document recall@10 ≥ 0.95 of flat where
    the pooled default's nlist/NPROBE_SHARE did not.
    """
    return min(nlist, max(MIN_NPROBE, nlist // WINDOW_NPROBE_SHARE))


def wider_nprobe(params: dict[str, int]) -> int | None:
    """The nprobe an IVF index of window vectors with these kind parameters should visit instead of its own
    (`window_nprobe(nlist)`), or None when it is not IVF or already visits at least that many lists."""
    nlist, nprobe = params.get("nlist"), params.get("nprobe")
    if nlist is None or nprobe is None or window_nprobe(nlist) <= nprobe:
        return None
    return window_nprobe(nlist)


def for_windows(plan: IndexPlan) -> IndexPlan:
    """`plan` for an index of window vectors: an IVF plan visits `window_nprobe(nlist)` lists if that is more."""
    wider = wider_nprobe(plan.params)
    if wider is None:
        return plan
    return replace(plan, search={**plan.search, "nprobe": wider}, params={**plan.params, "nprobe": wider})


def ivfpq_plan(count: int | None, dim: int, **params: int) -> IndexPlan | None:
    """The ivfpq plan for these parameters: explicit IVF-PQ when nlist/m/nbits are given, else the sized default
    (None while `count` is unknown: FaissIndex then sizes it when it trains)."""
    if _explicit_ivfpq(params):
        return kind_plan("ivfpq", dim, **params)
    if count is None:
        return None
    return sized_ivfpq(count, dim, **params)


def check_kind_params(kind: str, params: Mapping[str, Any]) -> None:
    """Refuse now what an index of `kind` will refuse of `params` when it is made (a store makes its index on its
    first add, after the texts were embedded): parameters the kind does not take, values that are not positive
    ints, k_factor with nlist/m/nbits. What depends on the vector size (m dividing it) waits for the index.

    Raises:
        ValueError: an unknown kind or a bad value.
        TypeError: parameters the kind does not take.
    """
    if kind not in KIND_PARAMS:
        raise ValueError(f"kind must be one of {tuple(KIND_PARAMS)}, got {kind!r}.")
    if kind == "ivfpq":
        _explicit_ivfpq(params)
    else:
        _resolve(kind, params)


def _explicit_ivfpq(params: Mapping[str, Any]) -> bool:
    """Whether ivfpq `params` ask for explicit IVF-PQ (nlist, m or nbits given) rather than the sized default, checked.

    Raises:
        TypeError: k_factor with explicit parameters, or parameters ivfpq does not take.
        ValueError: values that are not positive ints.
    """
    if any(key in params for key in STRUCTURAL_IVFPQ):
        if "k_factor" in params:
            raise TypeError("k_factor applies to the sized default (with refinement); drop it, or drop nlist/m/nbits.")
        _resolve("ivfpq", params)
        return True
    unknown = sorted(set(params) - {"nprobe", "k_factor"})
    if unknown:
        raise TypeError(
            f"kind='ivfpq' takes no parameter(s) {unknown}; its parameters: nlist, nprobe, m, nbits, k_factor."
        )
    _check_positive(params)
    return False


def requested_plan(kind: str | None, factory: str | None, params: dict[str, Any], dim: int) -> IndexPlan | None:
    """The plan that FaissIndex's constructor arguments ask for: a factory string, or a kind (default "flat") with
    its parameters; None for the sized ivfpq default while the training size is unknown.

    Raises:
        ValueError: both a kind (or parameters) and a factory, an unknown kind, or bad values.
        TypeError: parameters the kind does not take.
    """
    if factory is not None:
        if kind is not None or params:
            raise ValueError(
                "Pass either kind (with its parameters) or factory (with search=...), not both; got "
                f"kind={kind!r}, factory={factory!r}, parameters {sorted(params)}."
            )
        return factory_plan(factory)
    kind = kind or "flat"
    if kind not in KIND_PARAMS:
        raise ValueError(f"kind must be one of {tuple(KIND_PARAMS)}, got {kind!r} (or pass factory=...).")
    if kind != "ivfpq":
        return kind_plan(kind, dim, **params)
    return ivfpq_plan(None, dim, **params)


def factory_plan(factory: str, search: str | dict[str, float] | None = None) -> IndexPlan:
    """A plan from any faiss index-factory string, e.g. "OPQ48,IVF4096,PQ48x8,Refine(SQ8)".

    Args:
        factory: the factory string (an "IDMap"/"IDMap2" prefix is accepted and dropped: FaissIndex adds it).
        search: ParameterSpace values, as "nprobe=64,k_factor_rf=16" or a dict.

    Raises:
        ValueError: an empty factory string or a malformed search string.
    """
    if not isinstance(factory, str) or not factory.strip():
        raise ValueError(
            f"factory must be a faiss index-factory string such as 'IVF1024,PQ48,Refine(SQ8)', got {factory!r}."
        )
    tokens = [token for token in _tokens(factory) if token not in ("IDMap", "IDMap2")]
    values = parse_search(search)
    return IndexPlan(_kind_of_factory(tokens), ",".join(tokens), search=values)


def parse_search(search: str | dict[str, float] | None) -> dict[str, float]:
    """ParameterSpace values from "name=value,name=value" or a dict (numbers only).

    Raises:
        ValueError: a malformed entry.
    """
    if search is None or search == "":
        return {}
    items = search.items() if isinstance(search, dict) else (entry.partition("=")[::2] for entry in search.split(","))
    values: dict[str, float] = {}
    for key, raw in items:
        try:
            number = float(raw)
        except (TypeError, ValueError) as error:
            raise ValueError(f"Search parameter {key!r}={raw!r} is not a number; write e.g. 'nprobe=64'.") from error
        if not str(key).strip():
            raise ValueError(f"Search parameters must read 'name=value,…' (e.g. 'nprobe=64'), got {search!r}.")
        values[str(key).strip()] = int(number) if number.is_integer() else number
    return values


def default_nlist(count: int) -> int:
    """The power of two nearest 4·√count, at most count/POINTS_PER_CENTROID (≥ 1)."""
    nlist = 2 ** round(math.log2(4 * math.sqrt(max(count, 1))))
    while nlist > 1 and nlist * POINTS_PER_CENTROID > count:
        nlist //= 2
    return max(1, nlist)


def default_subquantizers(dim: int) -> int:
    """About dim/DIMENSIONS_PER_CODE PQ sub-quantizers: the largest GPU-supported m ≤ max(1, dim/DIMENSIONS_PER_CODE)
    dividing dim; else the largest divisor of dim below that."""
    target = max(1, dim // DIMENSIONS_PER_CODE)
    for m in sorted(GPU_PQ_SUBQUANTIZERS, reverse=True):
        if m <= target and dim % m == 0 and dim // m in GPU_PQ_SUBDIMENSIONS:
            return m
    return max(m for m in range(1, target + 1) if dim % m == 0)


def _resolve(kind: str, given: Mapping[str, Any]) -> dict[str, int]:
    defaults = KIND_PARAMS[kind]
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        accepted = ", ".join(defaults) or "none"
        raise TypeError(f"kind={kind!r} takes no parameter(s) {unknown}; its parameters: {accepted}.")
    _check_positive(given)
    return {**defaults, **{key: int(value) for key, value in given.items()}}


def _check_positive(params: Mapping[str, Any]) -> None:
    for key, value in params.items():
        if not is_positive_int(value, numpy=True):
            raise ValueError(f"{key} must be a positive int, got {value!r}.")


def _check_nprobe(params: dict[str, int]) -> None:
    if params["nprobe"] > params["nlist"]:
        raise ValueError(f"nprobe={params['nprobe']} exceeds nlist={params['nlist']}; use nprobe ≤ nlist.")


def _check_pq(dim: int, m: int, nbits: int) -> None:
    if dim % m:
        raise ValueError(f"m={m} sub-quantizers must divide dim={dim}; pick a divisor of {dim}.")
    if nbits > 16:
        raise ValueError(f"nbits={nbits} is too large; use 4–12 (8 is usual).")


def _tokens(factory: str) -> list[str]:
    """Top-level comma-separated parts of a factory string (commas inside parentheses kept)."""
    tokens, depth, current = [], 0, ""
    for char in factory.replace(" ", ""):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            tokens.append(current)
            current = ""
        else:
            current += char
    return [*tokens, current] if current else tokens


def _kind_of_factory(tokens: list[str]) -> str:
    """The FaissIndex kind a factory string amounts to ("custom" when none fits)."""
    core = [token for token in tokens if not token.startswith(("OPQ", "PCA", "RR", "L2norm", "Refine"))]
    if core == ["Flat"]:
        return "flat"
    if len(core) == 1 and core[0].startswith("HNSW") and core[0][4:].isdigit():
        return "hnsw"
    if len(core) == 2 and core[0].startswith("IVF") and core[0][3:].isdigit():
        if core[1] == "Flat":
            return "ivf"
        if core[1].startswith("PQ") and "fs" not in core[1]:
            return "ivfpq"
    return "custom"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
