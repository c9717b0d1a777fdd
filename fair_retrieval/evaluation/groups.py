"""Grouping queries by where their answer sits, and by how long their document is (PosIR-style).

A grouping is an ordered mapping group name → query ids. Position bias is read off by comparing a metric across
the groups of one grouping (PSI, harmonic mean). Groups may overlap (a FineWeb-PosQ question can span two thirds).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fair_retrieval.evaluation.data.task import RetrievalTask

Grouping = dict[str, list[str]]

THIRDS = ("begin", "middle", "end")
# SQuAD-PosQ's published character buckets of the answer start (NovaSearch, arXiv 2505.13950).
SQUAD_POSQ_EDGES = (0, 100, 200, 300, 400, 500, 3120)


def _require_positions(task: RetrievalTask) -> None:
    if not task.positions:
        raise ValueError(
            f"Task {task.name!r} has no answer positions, so it cannot be grouped by position; "
            "use a position benchmark (squad-v2, xquad:LANG, needle, PosIR, FineWeb-PosQ) or grouping='none'."
        )


def position_bin(relative: float, n_bins: int) -> int:
    """Index in [0, n_bins) of the equal-width bin holding `relative` ∈ [0, 1] (1.0 falls in the last bin)."""
    return min(n_bins - 1, max(0, int(relative * n_bins)))


def position_thirds(task: RetrievalTask) -> Grouping:
    """begin / middle / end: the answer starts in the first, second or last third of its document.

    Tasks whose dataset gives its own labels (FineWeb-PosQ's span classes) use those labels instead.
    """
    if not task.positions and task.labels:
        return preset_labels(task)
    _require_positions(task)
    groups: Grouping = {name: [] for name in THIRDS}
    for qid in task.queries:
        if qid in task.positions:
            groups[THIRDS[position_bin(task.positions[qid].relative, 3)]].append(qid)
    return {name: ids for name, ids in groups.items() if ids}


def position_bins(task: RetrievalTask, n_bins: int = 10) -> Grouping:
    """Finer equal-width bins of relative answer position, for plots ("0.0-0.1", …, "0.9-1.0")."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be ≥ 1, got {n_bins}.")
    _require_positions(task)
    names = [f"{i / n_bins:.{_digits(n_bins)}f}-{(i + 1) / n_bins:.{_digits(n_bins)}f}" for i in range(n_bins)]
    groups: Grouping = {name: [] for name in names}
    for qid in task.queries:
        if qid in task.positions:
            groups[names[position_bin(task.positions[qid].relative, n_bins)]].append(qid)
    return {name: ids for name, ids in groups.items() if ids}


def bin_centers(grouping: Grouping) -> list[float]:
    """Centres of bins named "lo-hi" by `position_bins`, in grouping order."""
    centers = []
    for name in grouping:
        low, high = (float(x) for x in name.split("-"))
        centers.append((low + high) / 2)
    return centers


def char_offset_buckets(task: RetrievalTask, edges: Sequence[int] = SQUAD_POSQ_EDGES) -> Grouping:
    """Absolute character offset of the answer start, in the buckets SQuAD-PosQ publishes ([0-100], …)."""
    _require_positions(task)
    names = [f"{edges[i]}-{edges[i + 1]}" for i in range(len(edges) - 1)]
    groups: Grouping = {name: [] for name in names}
    for qid in task.queries:
        if qid not in task.positions:
            continue
        start = task.positions[qid].char_start
        for i, name in enumerate(names):
            if edges[i] <= start < edges[i + 1] or (i == len(names) - 1 and start == edges[-1]):
                groups[name].append(qid)
                break
    return {name: ids for name, ids in groups.items() if ids}


def length_quartiles(task: RetrievalTask) -> Grouping:
    """Q1…Q4: queries bucketed by the token length of their relevant document (quartiles over the queries).

    Why: in PosIR, length and position are confounded (late answers only exist in long documents); comparing
    positions *within* a length bucket separates the two effects. Lengths come from `task.doc_tokens` when the
    builder measured them, else from characters. Quartile edges are the 25/50/75 % quantiles, or the fixed token
    edges a dataset publishes (`info["length_edges"]`, PosIR: 512/1024/1536); a length equal to an edge goes to the
    lower bucket. Empty buckets (many equal lengths) are left out.
    """
    lengths = {qid: _positive_length(task, qid) for qid in task.queries}
    values = np.array(list(lengths.values()), dtype=float)
    fixed = task.info.get("length_edges")
    edges = np.array(fixed, dtype=float) if isinstance(fixed, list) else np.quantile(values, [0.25, 0.5, 0.75])
    groups: Grouping = {f"Q{i + 1}": [] for i in range(4)}
    for qid, length in lengths.items():
        groups[f"Q{int(np.searchsorted(edges, length, side='left')) + 1}"].append(qid)
    return {name: ids for name, ids in groups.items() if ids}


def length_by_position(task: RetrievalTask) -> Grouping:
    """PosIR's length-controlled view: every length quartile split into begin / middle / end ("Q1/begin", …)."""
    thirds = position_thirds(task)
    third_of = {qid: name for name, ids in thirds.items() for qid in ids}
    groups: Grouping = {}
    for quartile, ids in length_quartiles(task).items():
        for third in thirds:
            members = [qid for qid in ids if third_of.get(qid) == third]
            if members:
                groups[f"{quartile}/{third}"] = members
    return groups


def preset_labels(task: RetrievalTask) -> Grouping:
    """Groups from the labels the dataset ships (e.g. FineWeb-PosQ span classes), in a natural order."""
    order = {name: i for i, name in enumerate(("beginning", "begin", "middle", "end"))}
    groups: Grouping = {}
    for qid in task.queries:
        for label in task.labels.get(qid, ()):
            groups.setdefault(label, []).append(qid)
    return dict(sorted(groups.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


GROUPINGS = {
    "thirds": position_thirds,
    "bins": position_bins,
    "squad-posq": char_offset_buckets,
    "length": length_quartiles,
    "length-position": length_by_position,
    "labels": preset_labels,
}


def make_grouping(task: RetrievalTask, kind: str) -> Grouping:
    """Build the grouping named `kind` (one of GROUPINGS, or "none" for no groups)."""
    if kind == "none":
        return {}
    if kind not in GROUPINGS:
        raise ValueError(f"Unknown grouping {kind!r}; choose one of {['none', *GROUPINGS]}.")
    return GROUPINGS[kind](task)


def default_grouping(task: RetrievalTask) -> str:
    """The grouping a task asks for (`info["grouping"]`), else "thirds" with positions or labels, else "none"."""
    preset = task.info.get("grouping")
    if isinstance(preset, str) and preset in GROUPINGS:
        return preset
    return "thirds" if (task.positions or task.labels) else "none"


def _positive_length(task: RetrievalTask, qid: str) -> int:
    doc = next(iter(task.qrels[qid]))
    if doc in task.doc_tokens:
        return task.doc_tokens[doc]
    return len(task.corpus[doc])


def _digits(n_bins: int) -> int:
    return 1 if 10 % n_bins == 0 else 2
