"""The calibration study on a named evaluation model: plain vs calibrated retrieval on every position set and SciFact.

    python benchmarks/calibration_study.py --model e5-small            # all position sets, SciFact, every candidate
    python benchmarks/calibration_study.py --model minilm --datasets squad-v2,reddit,needle,xquad:en,scifact
    python benchmarks/calibration_study.py --model e5-small --datasets needle --candidates default,paper

`--model` is an evaluation model's name (`fair_retrieval.evaluation.models`: "minilm", "e5-small") or any folder.
Documents are read in one window of `--max-tokens` (512: MiniLM's positional limit, e5-small's native window).
Position sets: SQuAD-v2 dev, SQuADShifts reddit (its first 300 documents, as `label_free.py`), the needle set and
XQuAD in each language asked for; SciFact (no positions) checks general retrieval. For every candidate and dataset:
nDCG@10, PSI, the change vs plain with 95 % paired-bootstrap intervals (questions resampled), the share of documents
it calibrates and the per-question split (questions whose relevant document it calibrated vs the others).

Configurations with min_full_baskets > 1 are scored from cached pieces (`quality.with_minimum`): documents below the
bar keep their plain vectors, only the others are embedded calibrated. SciFact (5,183 abstracts) is run for plain,
λ = 0.5 (the default before this study) and the candidates meeting the position part of the rule on this model
(`--scifact all` for every one). Results: OUTPUT/study.json and OUTPUT/study.md; an interrupted run resumes from
the embedding cache.

The rule that picks the default (docs/second_model_study.md, written before the runs): on both models and every
position set, nDCG@10 ≥ plain − 0.001 (point estimate), and SciFact ≥ plain − 0.005; among those, the largest mean
PSI cut. `combine` applies it to the studies of several models.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from label_free import first_documents
from quality import with_minimum

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.evaluation.bootstrap import paired_bootstrap
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.data.load import XQUAD_LANGUAGES, load_task
from fair_retrieval.evaluation.models import evaluation_model, model_label
from fair_retrieval.evaluation.runner import PRIMARY, Evaluator
from fair_retrieval.evaluation.split import calibrated_split

NDCG_TOLERANCE = 0.001  # a position set may lose at most this much nDCG@10 (point estimate)
SCIFACT_TOLERANCE = 0.005  # SciFact may lose at most this much
SCIFACT = "scifact"
POSITION_SETS = ("squad-v2", "reddit", "needle", *(f"xquad:{lang}" for lang in XQUAD_LANGUAGES))
CORE_SETS = ("squad-v2", "reddit", "needle")  # run for the default even with --prune

CANDIDATES: dict[str, Calibration | None] = {
    "plain": None,
    "λ=0.5": Calibration(strength=0.5),  # the default before this study
    "paper": Calibration.paper(),
    "λ=0.25": Calibration(strength=0.25),  # the default it chose
    "λ=0.1": Calibration(strength=0.1),
    "last layer": Calibration(strength=0.5, layers=1),
    "last 2 layers": Calibration(strength=0.5, layers=2),
    "ramp 128": Calibration(strength=0.5, strength_ramp=128),  # λ rises from 0 at 384 content tokens to 0.5 at 511
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm", help="an evaluation model's name (minilm, e5-small) or a folder")
    parser.add_argument("--max-tokens", type=int, default=512, help="document token budget and window (default 512)")
    parser.add_argument(
        "--datasets",
        default=",".join((*POSITION_SETS, SCIFACT)),
        help="comma-separated --data values (default: needle, squad-v2, reddit, XQuAD in 12 languages, scifact)",
    )
    parser.add_argument(
        "--candidates", default="all", help="comma-separated candidate names (default: all); plain always runs"
    )
    parser.add_argument("--scifact", default="passing", help="'passing' (plain, λ=0.5 and rule passers) or 'all'")
    parser.add_argument(
        "--prune",
        action="store_true",
        help="stop running a candidate on this model once it fails the rule on a position set (λ=0.5 still "
        f"runs on {', '.join(CORE_SETS)}); saves most of the time on 2 cores",
    )
    parser.add_argument("--reddit-documents", type=int, default=300, help="first N reddit documents (default 300)")
    parser.add_argument("--xquad-documents", type=int, default=None, help="first N documents of each XQuAD language")
    parser.add_argument("--cache-dir", type=Path, default=Path(".fair_cache"), help="embedding cache")
    parser.add_argument("--output", type=Path, default=None, help="results folder (default runs/study-MODEL)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default=None)
    parser.add_argument(
        "--combine", nargs="+", type=Path, metavar="DIR", help="apply the rule to these study folders and stop"
    )
    return parser.parse_args(argv)


def chosen_candidates(names: str) -> dict[str, Calibration | None]:
    """The candidates `--candidates` names, plain first."""
    if names == "all":
        return dict(CANDIDATES)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in CANDIDATES]
    if unknown:
        raise ValueError(f"unknown candidates {unknown}; choose among {list(CANDIDATES)}.")
    return {"plain": None, **{n: CANDIDATES[n] for n in wanted}}


def position_passes(results: dict[str, Any], label: str) -> bool:
    """True when `label` loses at most NDCG_TOLERANCE on every position set measured so far."""
    for dataset, result in results.items():
        if dataset == SCIFACT:
            continue
        run = result["runs"].get(label)
        if run is None or run["delta"] < -NDCG_TOLERANCE:
            return False
    return True


def run_dataset(
    dataset: str,
    embedder: FairEmbedder,
    cache: EmbeddingCache,
    candidates: dict[str, Calibration | None],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Every candidate on one dataset: scores, intervals, calibrated share and the per-question split."""
    task = load_task(dataset, embedder.token_lengths, args.max_tokens)
    if dataset == "reddit":
        task = first_documents(task, args.reddit_documents)
    elif dataset.startswith("xquad:"):
        task = first_documents(task, args.xquad_documents)
    evaluator = Evaluator(embedder, task, cache=cache)
    texts = list(task.corpus.values())
    plain_documents, _ = evaluator.document_embeddings(None)
    plain = evaluator.score("plain", plain_documents)
    base = {q: m[PRIMARY] for q, m in plain.per_query.items()}
    out: dict[str, Any] = {"task": task.summary(), "runs": {}}
    for label, calibration in candidates.items():
        started = time.perf_counter()
        if calibration is None:
            result = plain
        elif calibration.min_full_baskets > 1:
            result = evaluator.score(label, with_minimum(evaluator, embedder, cache, calibration), calibration)
        else:
            result = evaluator.score(label, evaluator.document_embeddings(calibration)[0], calibration)
        scores = {q: m[PRIMARY] for q, m in result.per_query.items()}
        row: dict[str, Any] = {
            "ndcg@10": result.overall[PRIMARY],
            "psi": result.psi,
            "delta": result.overall[PRIMARY] - plain.overall[PRIMARY],
            "psi_cut": None
            if not plain.psi or result.psi is None
            else (plain.psi - result.psi) / plain.psi,  # positive = fairer
            "groups": {g: m[PRIMARY] for g, m in result.groups.items()},
        }
        if calibration is not None:
            row.update(paired_bootstrap(base, scores, evaluator.grouping))
            flags = embedder.calibrated_texts(texts, calibration)
            row["calibrated_share"] = sum(flags) / len(flags)
            split = calibrated_split(base, scores, task.qrels, zip(task.doc_ids, flags, strict=True))
            row["split"] = {side: change.to_dict() for side, change in split.items()}
        out["runs"][label] = row
        logging.info(
            "%s %s: nDCG@10 %.4f (%+.4f), PSI %s, %.0f s",
            dataset,
            label,
            row["ndcg@10"],
            row["delta"],
            "—" if row["psi"] is None else f"{row['psi']:.3f}",
            time.perf_counter() - started,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.combine:
        reports = [json.loads((folder / "study.json").read_text(encoding="utf-8")) for folder in args.combine]
        print(render_combined(combine(reports)))
        return 0
    model = evaluation_model(args.model)
    label = model_label(args.model)
    output = args.output or Path("runs") / f"study-{label}"
    output.mkdir(parents=True, exist_ok=True)
    embedder = FairEmbedder(model, max_length=args.max_tokens, batch_size=args.batch_size, device=args.device)
    candidates = chosen_candidates(args.candidates)
    cache = EmbeddingCache(args.cache_dir)
    path = output / "study.json"
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    report.update(model=label, max_tokens=args.max_tokens)
    known = report.setdefault("candidates", {})  # a resumed study keeps the candidates of its earlier datasets
    known.update({k: None if c is None else c.to_dict() for k, c in candidates.items()})
    results: dict[str, Any] = report.setdefault("results", {})
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    for dataset in sorted(datasets, key=lambda d: d == SCIFACT):  # SciFact last: it runs for the passers only
        chosen = candidates
        if dataset == SCIFACT and args.scifact == "passing":
            chosen = {k: c for k, c in candidates.items() if k in ("plain", "λ=0.5") or position_passes(results, k)}
        elif dataset != SCIFACT and args.prune:
            kept = ("plain", "λ=0.5") if dataset in CORE_SETS else ("plain",)
            chosen = {k: c for k, c in candidates.items() if k in kept or position_passes(results, k)}
            pruned = sorted(set(candidates) - set(chosen))
            if pruned:
                logging.info("%s: not run for %s (failed the rule on an earlier position set)", dataset, pruned)
            report.setdefault("pruned", {})[dataset] = pruned
        fresh = run_dataset(dataset, embedder, cache, chosen, args)
        if dataset in results:  # a resumed study: the candidates run earlier on this dataset stay
            fresh["runs"] = {**results[dataset]["runs"], **fresh["runs"]}
        results[dataset] = fresh
        path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        (output / "study.md").write_text(render(report), encoding="utf-8")
    print((output / "study.md").read_text(encoding="utf-8"))
    return 0


def verdict(report: dict[str, Any], label: str) -> dict[str, Any]:
    """The rule on one model's study: worst position-set change, SciFact change, mean PSI cut, pass or fail."""
    deltas, cuts = [], []
    for dataset, result in report["results"].items():
        run = result["runs"].get(label)
        if dataset == SCIFACT or run is None:
            continue
        deltas.append(run["delta"])
        cuts.append(run["psi_cut"] or 0.0)
    scifact = report["results"].get(SCIFACT, {}).get("runs", {}).get(label)
    worst = min(deltas) if deltas else None
    passes = (
        worst is not None
        and worst >= -NDCG_TOLERANCE
        and scifact is not None
        and scifact["delta"] >= -SCIFACT_TOLERANCE
    )
    return {
        "worst_delta": worst,
        "mean_psi_cut": sum(cuts) / len(cuts) if cuts else None,
        "scifact_delta": None if scifact is None else scifact["delta"],
        "passes": passes,
    }


def combine(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule over several models: the candidates passing on every model, and the largest mean PSI cut of those."""
    labels = [k for k in reports[0]["candidates"] if all(k in r["candidates"] for r in reports)]
    table = {label: {r["model"]: verdict(r, label) for r in reports} for label in labels}
    passing = [label for label in labels if label != "plain" and all(v["passes"] for v in table[label].values())]

    def mean_cut(label: str) -> float:
        cuts = [v["mean_psi_cut"] or 0.0 for v in table[label].values()]
        return sum(cuts) / len(cuts)

    chosen = max(passing, key=mean_cut) if passing else None
    return {"table": table, "passing": passing, "chosen": chosen}


def render_combined(combined: dict[str, Any]) -> str:
    """Markdown: the rule over several models, one row per candidate."""
    models = list(next(iter(combined["table"].values())))
    header = ["candidate"] + [f"{m}: worst Δ / mean PSI cut / SciFact Δ" for m in models] + ["passes on all"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, per_model in combined["table"].items():
        if label == "plain":
            continue
        cells = [("**" + label + "**") if label == combined["chosen"] else label]
        for m in models:
            v = per_model[m]
            worst = "—" if v["worst_delta"] is None else f"{v['worst_delta']:+.4f}"
            cut = "—" if v["mean_psi_cut"] is None else f"{v['mean_psi_cut']:.0%}"
            scifact = "not run" if v["scifact_delta"] is None else f"{v['scifact_delta']:+.4f}"
            cells.append(f"{worst} / {cut} / {scifact}" + (" ✔" if v["passes"] else " ✘"))
        cells.append("✔" if label in combined["passing"] else "✘")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Chosen by the rule: {combined['chosen'] or 'none (no calibrating configuration passes on all)'}."]
    return "\n".join(lines) + "\n"


def render(report: dict[str, Any]) -> str:
    """Markdown: one table per dataset (Δ nDCG@10 [95 % CI], PSI cut, calibrated share, split), then the verdicts."""
    lines = [f"# Calibration study: {report['model']}, documents of ≤ {report['max_tokens']} tokens", ""]
    for dataset, result in report["results"].items():
        runs = result["runs"]
        plain = runs["plain"]
        psi = "—" if plain["psi"] is None else f"{plain['psi']:.3f}"
        summary = result["task"]
        lines += [
            f"## {dataset}: plain nDCG@10 {plain['ndcg@10']:.4f}, PSI {psi} "
            f"({summary.get('num_documents', '?')} documents, {summary.get('num_queries', '?')} questions)",
            "",
            "| candidate | nDCG@10 | Δ [95% CI] | PSI cut [95% CI] | calibrated docs | "
            "Δ calibrated-doc / other questions |",
            "|---|---|---|---|---|---|",
        ]
        for label, run in runs.items():
            if label == "plain":
                continue
            lo, hi = run.get("ndcg_delta_ci", [float("nan")] * 2)
            cut = "—" if run["psi_cut"] is None else f"{run['psi_cut']:.0%}"
            if "psi_change_ci" in run:
                a, b = run["psi_change_ci"]
                cut += f" [{-b:.0%}, {-a:.0%}]"
            split = run.get("split", {})
            parts = " / ".join(
                "—" if split.get(s, {}).get("delta") is None else f"{split[s]['delta']:+.4f} ({split[s]['questions']})"
                for s in ("calibrated", "plain")
            )
            lines.append(
                f"| {label} | {run['ndcg@10']:.4f} | {run['delta']:+.4f} [{lo:+.4f}, {hi:+.4f}] | {cut} | "
                f"{run.get('calibrated_share', 0):.0%} | {parts} |"
            )
        lines.append("")
    lines += [
        "## The rule on this model",
        "",
        f"Every position set ≥ plain − {NDCG_TOLERANCE}, SciFact ≥ plain − {SCIFACT_TOLERANCE}.",
        "",
        "| candidate | worst position-set Δ | mean PSI cut | SciFact Δ | passes |",
        "|---|---|---|---|---|",
    ]
    for label in report["candidates"]:
        if label == "plain":
            continue
        v = verdict(report, label)
        worst = "—" if v["worst_delta"] is None else f"{v['worst_delta']:+.4f}"
        cut = "—" if v["mean_psi_cut"] is None else f"{v['mean_psi_cut']:.0%}"
        scifact = "not run" if v["scifact_delta"] is None else f"{v['scifact_delta']:+.4f}"
        lines.append(f"| {label} | {worst} | {cut} | {scifact} | {'✔' if v['passes'] else '✘'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
