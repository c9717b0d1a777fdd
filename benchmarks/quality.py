"""Reproduce the README's quality table: plain vs calibrated retrieval on the shared dev data, one command.

    python benchmarks/quality.py                       # MiniLM, 512 tokens, the configurations of the defaults study
    python benchmarks/quality.py --datasets needle     # no shared data needed

For every dataset and configuration it reports overall nDCG@10, Recall@10, the Position Sensitivity Index (PSI,
1 − min/max of nDCG@10 over answer-position thirds) and the harmonic mean over thirds. Embeddings are cached under
--cache-dir, so an interrupted run resumes where it stopped. SciFact (no positions; 5,183 abstracts, the slow part)
checks that calibration does not cost general retrieval quality; by default it is run for the configurations the
README reports (plain, the paper's, and special_tokens="preserve" at λ = 0.25, 0.5, 0.75).

Target (issue 3): PSI down ≥ 35 % relative to plain (mean over position datasets) with overall nDCG@10 no lower than
plain on each, and SciFact nDCG@10 within ±0.5 point of plain.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.evaluation.bundled import bundled_model
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.runner import Evaluator
from fair_retrieval.evaluation.sources import load_task

POSITION_DATASETS = ("squad-v2", "xquad:en", "xquad:de")
PSI_TARGET = 0.35
SCIFACT_TOLERANCE = 0.005
PAPER = "λ=0.5 partial=equal special=content"
README_SCIFACT = (
    "plain,paper,λ=0.25 partial=equal special=preserve,λ=0.5 partial=equal special=preserve,"
    "λ=0.75 partial=equal special=preserve"
)


def study_configurations() -> dict[str, Calibration | None]:
    """Plain, then strengths 0.25/0.5/0.75 × partial_basket × special_tokens (the paper's is s0.5/equal/content)."""
    configs: dict[str, Calibration | None] = {"plain": None}
    for strength, partial, special in itertools.product(
        (0.25, 0.5, 0.75), ("equal", "proportional"), ("content", "preserve")
    ):
        label = f"λ={strength} partial={partial} special={special}"
        configs[label] = Calibration(strength=strength, partial_basket=partial, special_tokens=special)
    # Follow-up between the two best special_tokens="preserve" strengths (tried after the grid above).
    configs["λ=0.65 partial=equal special=preserve"] = Calibration(strength=0.65, special_tokens="preserve")
    return configs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--max-tokens", type=int, default=512, help="document token budget (default 512)")
    parser.add_argument(
        "--datasets",
        default=",".join((*POSITION_DATASETS, "scifact")),
        help="comma-separated --data values (default: squad-v2,xquad:en,xquad:de,scifact)",
    )
    parser.add_argument(
        "--scifact",
        default=README_SCIFACT,
        help="configurations run on SciFact (5,183 abstracts, the slow part): comma-separated labels ('plain', "
        "'paper' or a label of the table; default: those in the README), 'candidates' (plain, paper and those "
        "meeting the position target) or 'all'",
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="JSON",
        help="an extra configuration as Calibration JSON (repeatable)",
    )
    parser.add_argument("--cache-dir", type=Path, default=Path(".fair_cache"), help="embedding cache")
    parser.add_argument("--output", type=Path, default=Path("runs/quality"), help="folder for quality.json/.md")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    model = args.model or bundled_model()
    embedder = FairEmbedder(model, max_length=args.max_tokens, batch_size=args.batch_size, device=args.device)
    configs = study_configurations()
    for text in args.extra:
        calibration = Calibration.from_json(text)
        configs[f"extra {calibration.to_json()}"] = calibration
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    cache = EmbeddingCache(args.cache_dir)
    results: dict[str, dict[str, Any]] = {}
    report: dict[str, Any] = {
        "model": model,
        "max_tokens": args.max_tokens,
        "configurations": {label: (c.to_dict() if c else None) for label, c in configs.items()},
        "results": results,
    }
    started = time.time()
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    for dataset in datasets:
        task = load_task(dataset, embedder.token_lengths, args.max_tokens)
        evaluator = Evaluator(embedder, task, cache=cache, show_progress_bar=True)
        results[dataset] = {"task": task.summary(), "runs": {}}
        chosen = configs
        if dataset == "scifact" and args.scifact == "candidates":
            chosen = {label: configs[label] for label in _scifact_candidates(results, configs)}
        elif dataset == "scifact" and args.scifact != "all":
            wanted = [PAPER if name.strip() == "paper" else name.strip() for name in args.scifact.split(",")]
            unknown = [name for name in wanted if name not in configs]
            if unknown:
                raise ValueError(f"--scifact names unknown configurations {unknown}; see the table's labels.")
            chosen = {label: configs[label] for label in wanted}
        for label, calibration in chosen.items():
            result = evaluator.run(label, calibration)
            scores = {qid: m["ndcg@10"] for qid, m in result.per_query.items()}
            per_query.setdefault(dataset, {})[label] = scores
            intervals: dict[str, Any] = {}
            if label != "plain" and "plain" in per_query[dataset]:
                intervals = paired_bootstrap(per_query[dataset]["plain"], scores, evaluator.grouping)
            results[dataset]["runs"][label] = {
                "ndcg@10": result.overall["ndcg@10"],
                "recall@10": result.overall["recall@10"],
                "psi": result.psi,
                "harmonic_mean": result.harmonic_mean,
                "groups": {g: m["ndcg@10"] for g, m in result.groups.items()},
                "seconds": result.seconds,
                **intervals,
            }
            _write(report, args.output, started)
    _write(report, args.output, started)
    print((args.output / "quality.md").read_text(encoding="utf-8"))
    return 0


def paired_bootstrap(
    plain: dict[str, float], run: dict[str, float], groups: dict[str, list[str]], samples: int = 2000, seed: int = 0
) -> dict[str, list[float]]:
    """95 % paired-bootstrap intervals (queries resampled) of the nDCG@10 change and the relative PSI change.

    Why: the position groups hold a few hundred queries each, so PSI differences of a few points can be noise;
    the intervals say which differences the data supports.
    """
    rng = np.random.default_rng(seed)
    qids = list(plain)
    a = np.array([plain[q] for q in qids])
    b = np.array([run[q] for q in qids])
    picks = rng.integers(0, len(qids), size=(samples, len(qids)))
    deltas = (b - a)[picks].mean(axis=1)
    out = {"ndcg_delta_ci": [float(np.percentile(deltas, 2.5)), float(np.percentile(deltas, 97.5))]}
    if len(groups) >= 2:
        plain_means, run_means = [], []
        for ids in groups.values():
            ga = np.array([plain[q] for q in ids])
            gb = np.array([run[q] for q in ids])
            chosen = rng.integers(0, len(ids), size=(samples, len(ids)))
            plain_means.append(ga[chosen].mean(axis=1))
            run_means.append(gb[chosen].mean(axis=1))
        pm, rm = np.stack(plain_means), np.stack(run_means)
        psi_plain = 1 - pm.min(axis=0) / np.maximum(pm.max(axis=0), 1e-12)
        psi_run = 1 - rm.min(axis=0) / np.maximum(rm.max(axis=0), 1e-12)
        change = (psi_run - psi_plain) / np.maximum(psi_plain, 1e-12)
        out["psi_change_ci"] = [float(np.percentile(change, 2.5)), float(np.percentile(change, 97.5))]
    return out


def _scifact_candidates(results: dict[str, dict[str, Any]], configs: dict[str, Calibration | None]) -> list[str]:
    keep = ["plain", PAPER]
    for label in configs:
        if label not in keep and _position_verdict(results, label).get("meets_position_target"):
            keep.append(label)
    return keep


def _position_verdict(results: dict[str, dict[str, Any]], label: str) -> dict[str, Any]:
    """Mean relative PSI change and the worst nDCG@10 change over the position datasets that were run."""
    changes, deltas = [], []
    for entry in results.values():
        runs = entry["runs"]
        if runs.get("plain", {}).get("psi") is None or label not in runs:
            continue
        plain, run = runs["plain"], runs[label]
        if plain["psi"] > 0:
            changes.append((run["psi"] - plain["psi"]) / plain["psi"])
        deltas.append(run["ndcg@10"] - plain["ndcg@10"])
    if not changes:
        return {}
    mean_change = sum(changes) / len(changes)
    return {
        "mean_psi_change": mean_change,
        "worst_ndcg_delta": min(deltas),
        "meets_position_target": mean_change <= -PSI_TARGET and min(deltas) >= 0.0,
    }


def _write(report: dict[str, Any], folder: Path, started: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    report["elapsed_seconds"] = round(time.time() - started, 1)
    results = report["results"]
    report["verdicts"] = {}
    for label in report["configurations"]:
        verdict = _position_verdict(results, label)
        scifact = results.get("scifact", {}).get("runs", {})
        if label in scifact and "plain" in scifact:
            verdict["scifact_delta"] = scifact[label]["ndcg@10"] - scifact["plain"]["ndcg@10"]
            verdict["meets_target"] = (
                bool(verdict.get("meets_position_target")) and abs(verdict["scifact_delta"]) <= SCIFACT_TOLERANCE
            )
        report["verdicts"][label] = verdict
    (folder / "quality.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / "quality.md").write_text(markdown_table(report), encoding="utf-8")


def markdown_table(report: dict[str, Any]) -> str:
    """The README table: one row per configuration, nDCG@10 / PSI per dataset, then the verdict."""
    results = report["results"]
    datasets = list(results)
    header = ["configuration"]
    for dataset in datasets:
        header += [f"{dataset} nDCG@10"] + ([f"{dataset} PSI"] if dataset != "scifact" else [])
    header += ["mean ΔPSI", "worst ΔnDCG (pos.)", "Δ SciFact", "target"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label in report["configurations"]:
        cells = [label]
        for dataset in datasets:
            run = results[dataset]["runs"].get(label)
            cells.append(f"{run['ndcg@10']:.4f}" if run else "—")
            if dataset != "scifact":
                cells.append(f"{run['psi']:.4f}" if run and run["psi"] is not None else "—")
        verdict = report["verdicts"].get(label, {})
        cells.append(f"{verdict['mean_psi_change']:+.1%}" if "mean_psi_change" in verdict else "—")
        cells.append(f"{verdict['worst_ndcg_delta']:+.4f}" if "worst_ndcg_delta" in verdict else "—")
        cells.append(f"{verdict['scifact_delta']:+.4f}" if "scifact_delta" in verdict else "—")
        cells.append(
            "✔" if verdict.get("meets_target") else ("pos. only" if verdict.get("meets_position_target") else "")
        )
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += _interval_table(report)
    lines.append(
        f"Model: {report['model']}, documents of ≤ {report['max_tokens']} tokens; elapsed "
        f"{report.get('elapsed_seconds', 0):.0f} s. PSI = 1 − min/max nDCG@10 over begin/middle/end thirds."
    )
    return "\n".join(lines) + "\n"


def _interval_table(report: dict[str, Any]) -> list[str]:
    """Changes vs plain with 95 % paired-bootstrap intervals, per dataset."""
    results = report["results"]
    datasets = list(results)
    header = ["configuration"] + [f"{d} ΔnDCG@10 [95% CI]" for d in datasets]
    header += [f"{d} ΔPSI [95% CI]" for d in datasets if d != "scifact"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label in report["configurations"]:
        if label == "plain":
            continue
        cells = [label]
        for dataset in datasets:
            run, plain = results[dataset]["runs"].get(label), results[dataset]["runs"].get("plain")
            if run and plain and "ndcg_delta_ci" in run:
                lo, hi = run["ndcg_delta_ci"]
                cells.append(f"{run['ndcg@10'] - plain['ndcg@10']:+.4f} [{lo:+.4f}, {hi:+.4f}]")
            else:
                cells.append("—")
        for dataset in datasets:
            if dataset == "scifact":
                continue
            run, plain = results[dataset]["runs"].get(label), results[dataset]["runs"].get("plain")
            if run and plain and "psi_change_ci" in run and plain["psi"]:
                lo, hi = run["psi_change_ci"]
                cells.append(f"{(run['psi'] - plain['psi']) / plain['psi']:+.0%} [{lo:+.0%}, {hi:+.0%}]")
            else:
                cells.append("—")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


if __name__ == "__main__":
    sys.exit(main())
