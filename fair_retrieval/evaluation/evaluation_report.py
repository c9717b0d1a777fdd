"""Reports of an evaluation: a terminal table, a JSON document with a fixed schema, and its validation.

JSON report (schema_version 1)::

    {
      "schema_version": 1,
      "created": "2026-01-01T12:00:00Z",              # UTC
      "fair_retrieval_version": "0.1.0",
      "model": {"name": str, "pooling": str|null, "max_length": int|null, "num_layers": int|null},
      "task": {"name": str, "num_documents": int, "num_queries": int, "num_judgements": int,
               "has_positions": bool, "info": {...}},
      "grouping": {"name": "thirds"|"bins"|"squad-posq"|"length"|"length-position"|"labels"|"none",
                   "groups": {group: number of queries}},          # in display order
      "bins": {bin: number of queries},                             # finer position bins ("0.0-0.1", …) or {}
      "metrics": ["ndcg@10", "recall@10", "recall@100"],
      "runs": [                      # a baseline (e.g. "plain", or the embedder run today) first, then the others
        {"label": str, "calibration": {Calibration fields}|null,
         "overall": {metric: float, "count": float},
         "groups": {group: {metric: float, "count": float}},
         "bins": {bin: {metric: float, "count": float}},
         "psi": float|null,                 # 1 − min/max of the groups' nDCG@10 (null with < 2 groups)
         "harmonic_mean": float|null,       # harmonic mean of the groups' nDCG@10 (null without groups)
         "seconds": float,                  # document embedding time (0 when loaded from the cache)
         "calibrated_documents": int|null,  # documents the calibration changed (the rest were too short)
         "tokens_never_embedded": null | {   # optional; null: the embedder does not say (unknown)
             "documents": int, "truncated_documents": int, "tokens": int, "cut_tokens": int,
             "share": float, "max_length": int}}   # cut_tokens / tokens: document ends past the window
      ],
      "comparison": null | {"baseline": str, "candidate": str, "ndcg@10_delta": float,   # first run vs last run
                            "psi_relative_change": float|null, "harmonic_mean_delta": float|null}
    }

`REPORT_SCHEMA` is the same as a JSON Schema, for validation by consumers and tests.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.evaluation.data.task import RetrievalTask
from fair_retrieval.evaluation.runner import PRIMARY, RunResult, format_score

SCHEMA_VERSION = 1

_SCORES = {
    "type": "object",
    "additionalProperties": {"type": "number"},
    "required": ["count"],
}
_RUN = {
    "type": "object",
    "required": ["label", "calibration", "overall", "groups", "bins", "psi", "harmonic_mean", "seconds"],
    "properties": {
        "label": {"type": "string"},
        "calibration": {"type": ["object", "null"]},
        "overall": _SCORES,
        "groups": {"type": "object", "additionalProperties": _SCORES},
        "bins": {"type": "object", "additionalProperties": _SCORES},
        "psi": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "harmonic_mean": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "seconds": {"type": "number", "minimum": 0},
        "calibrated_documents": {"type": ["integer", "null"], "minimum": 0},
        "tokens_never_embedded": {
            "type": ["object", "null"],
            "required": ["documents", "truncated_documents", "tokens", "cut_tokens", "share", "max_length"],
            "properties": {
                "documents": {"type": "integer", "minimum": 0},
                "truncated_documents": {"type": "integer", "minimum": 0},
                "tokens": {"type": "integer", "minimum": 0},
                "cut_tokens": {"type": "integer", "minimum": 0},
                "share": {"type": "number", "minimum": 0, "maximum": 1},
                "max_length": {"type": "integer", "minimum": 1},
            },
        },
    },
}
REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "fair-retrieval evaluation report",
    "type": "object",
    "required": [
        "schema_version",
        "created",
        "fair_retrieval_version",
        "model",
        "task",
        "grouping",
        "bins",
        "metrics",
        "runs",
        "comparison",
    ],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "created": {"type": "string"},
        "fair_retrieval_version": {"type": "string"},
        "model": {
            "type": "object",
            "required": ["name", "pooling", "max_length", "num_layers"],
            "properties": {
                "name": {"type": "string"},
                "pooling": {"type": ["string", "null"]},
                "max_length": {"type": ["integer", "null"]},
                "num_layers": {"type": ["integer", "null"]},
            },
        },
        "task": {
            "type": "object",
            "required": ["name", "num_documents", "num_queries", "num_judgements", "has_positions", "info"],
        },
        "grouping": {
            "type": "object",
            "required": ["name", "groups"],
            "properties": {
                "name": {"type": "string"},
                "groups": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
            },
        },
        "bins": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
        "metrics": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "runs": {"type": "array", "items": _RUN, "minItems": 1},
        "comparison": {
            "type": ["object", "null"],
            "required": ["baseline", "candidate", "ndcg@10_delta", "psi_relative_change", "harmonic_mean_delta"],
        },
    },
}


def build_report(
    embedder: Any,
    task: RetrievalTask,
    grouping_name: str,
    runs: Sequence[RunResult],
    metrics: Sequence[str],
    *,
    coverage: Sequence[dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """Assemble the JSON report (see the module docstring) from runs on one task; the first run is the baseline.

    Args:
        embedder: the embedder the report's `model` describes.
        task: the task all runs scored.
        grouping_name: the position grouping of the runs.
        runs: baseline first; the comparison is the first run vs the last.
        metrics: the reported metrics.
        coverage: per run, its `tokens_never_embedded` (`TokenCoverage.to_dict()`, or None when unknown); None
            leaves the field out.

    Raises:
        ValueError: without runs, or with a coverage list that does not match the runs.
    """
    if not runs:
        raise ValueError("A report needs at least one run.")
    if coverage is not None and len(coverage) != len(runs):
        raise ValueError(f"coverage has {len(coverage)} entries for {len(runs)} runs; give one per run (or None).")
    from fair_retrieval.version import __version__

    first = runs[0]
    return {
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fair_retrieval_version": __version__,
        "model": {
            "name": str(getattr(embedder, "model_name", type(embedder).__name__)),
            "pooling": getattr(embedder, "pooling", None),
            "max_length": getattr(embedder, "max_length", None),
            "num_layers": getattr(embedder, "num_layers", None),
        },
        "task": _jsonable(task.summary()),
        "grouping": {"name": grouping_name, "groups": {g: int(m["count"]) for g, m in first.groups.items()}},
        "bins": {b: int(m["count"]) for b, m in first.bins.items()},
        "metrics": list(metrics),
        "runs": [
            {**run.to_dict(), **({} if coverage is None else {"tokens_never_embedded": coverage[i]})}
            for i, run in enumerate(runs)
        ],
        "comparison": compare(runs[0], runs[-1]) if len(runs) >= 2 else None,
    }


def compare(baseline: RunResult, candidate: RunResult) -> dict[str, Any]:
    """Changes from `baseline` to `candidate`: nDCG@10 delta, relative PSI change, harmonic-mean delta."""
    psi_change = None
    if baseline.psi is not None and candidate.psi is not None and baseline.psi > 0:
        psi_change = (candidate.psi - baseline.psi) / baseline.psi
    hm_delta = None
    if baseline.harmonic_mean is not None and candidate.harmonic_mean is not None:
        hm_delta = candidate.harmonic_mean - baseline.harmonic_mean
    return {
        "baseline": baseline.label,
        "candidate": candidate.label,
        "ndcg@10_delta": candidate.overall[PRIMARY] - baseline.overall[PRIMARY],
        "psi_relative_change": psi_change,
        "harmonic_mean_delta": hm_delta,
    }


def format_table(report: dict[str, Any]) -> str:
    """A plain-text table of a report: metrics and per-group nDCG@10 per run, Δ (last − first run) with two runs or
    more, and the share of tokens never embedded when the runs say it."""
    runs = report["runs"]
    labels = [run["label"] for run in runs]
    rows: list[tuple[str, list[float | None]]] = []
    for metric in report["metrics"]:
        rows.append((metric, [run["overall"].get(metric) for run in runs]))
    for group, count in report["grouping"]["groups"].items():
        rows.append((f"{PRIMARY} {group} (n={count})", [run["groups"][group][PRIMARY] for run in runs]))
    if report["grouping"]["groups"]:
        rows.append(("PSI (lower = fairer)", [run["psi"] for run in runs]))
        rows.append(("harmonic mean", [run["harmonic_mean"] for run in runs]))
    show_delta = len(runs) >= 2
    headers = ["", *labels, *(["Δ"] if show_delta else [])]
    body = []
    for name, values in rows:
        cells = [name, *(format_score(v) for v in values)]
        if show_delta:
            a, b = values[0], values[-1]
            cells.append("" if a is None or b is None else f"{b - a:+.4f}")
        body.append(cells)
    if any("tokens_never_embedded" in run for run in runs):
        body.append(["tokens never embedded", *(_share(run) for run in runs), *([""] if show_delta else [])])
    widths = [max(len(str(row[i])) for row in [headers, *body]) for i in range(len(headers))]
    lines = [_row(headers, widths), _row(["-" * w for w in widths], widths)]
    lines += [_row(cells, widths) for cells in body]
    task = report["task"]
    title = (
        f"{task['name']}: {task['num_queries']} queries, {task['num_documents']} documents — "
        f"{display_name(report['model']['name'])}, max_length={report['model']['max_length']}"
    )
    summary = _summary(report)
    coverage = [_coverage(run, task["num_documents"]) for run in runs if run.get("calibrated_documents") is not None]
    return "\n".join([title, *lines, *([summary] if summary else []), *coverage, *_truncation(runs)])


def _share(run: dict[str, Any]) -> str:
    """The table cell of a run's share of tokens never embedded ("unknown" when the embedder does not say)."""
    measured = run.get("tokens_never_embedded")
    return "unknown" if measured is None else f"{measured['share']:.1%}"


def _truncation(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Which documents the runs cut off at their window, and how much of the corpus they never read (one line per
    distinct measurement: a plain and a calibrated run of one embedder share theirs)."""
    labels: dict[str, list[str]] = {}
    measured: dict[str, dict[str, Any]] = {}
    for run in runs:
        tokens = run.get("tokens_never_embedded")
        if tokens and tokens["cut_tokens"]:
            key = repr(sorted(tokens.items()))
            labels.setdefault(key, []).append(run["label"])
            measured[key] = tokens
    return [
        f"{', '.join(labels[key])}: {m['truncated_documents']} of {m['documents']} documents exceed the "
        f"{m['max_length']}-token window; their ends, {m['cut_tokens']} of {m['tokens']} tokens ({m['share']:.1%}), "
        "are never embedded"
        for key, m in measured.items()
    ]


def _coverage(run: dict[str, Any], documents: int) -> str:
    """How many documents a calibrated run changed, and why the rest kept their plain vectors."""
    count = run["calibrated_documents"]
    needed = Calibration.from_dict(run["calibration"]).min_content_tokens
    line = f"{run['label']}: {count} of {documents} documents calibrated"
    if count < documents:
        line += f"; the other {documents - count} have fewer than {needed} content tokens and stay plain"
    if count == 0:
        line += " (for short documents use a smaller --basket-size or --min-full-baskets 1)"
    return line


def display_name(model: str) -> str:
    """A short model name for titles: a Hub id as is; a local path by its last two folders."""
    parts = [p for p in model.replace("\\", "/").split("/") if p]
    if model.startswith(("/", ".", "~")) or len(parts) > 2:
        return "/".join(parts[-2:])
    return model


def _summary(report: dict[str, Any]) -> str:
    comparison = report.get("comparison")
    if not comparison:
        return ""
    parts = [f"{comparison['candidate']} vs {comparison['baseline']}: nDCG@10 {comparison['ndcg@10_delta']:+.4f}"]
    if comparison["psi_relative_change"] is not None:
        parts.append(f"PSI {comparison['psi_relative_change']:+.1%} (relative)")
    if comparison["harmonic_mean_delta"] is not None:
        parts.append(f"harmonic mean {comparison['harmonic_mean_delta']:+.4f}")
    return ", ".join(parts)


def _row(cells: Sequence[Any], widths: list[int]) -> str:
    return "  ".join(
        str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
