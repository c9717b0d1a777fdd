"""The defaults study: plain vs calibrated retrieval on the dev data, over the full option space, one command.

    python benchmarks/quality.py                       # the full-space study (MiniLM; see --datasets, --scifact)
    python benchmarks/quality.py --configs first-study # the first, smaller study (strength × partial × special)
    python benchmarks/quality.py --datasets needle     # no evaluation data needed

Datasets are `--data` values, optionally with a token budget: "squad-v2" (512), "squad-v2@256", "xquad:en",
"scifact". For every dataset and configuration it reports overall nDCG@10, Recall@10, the Position Sensitivity Index
(PSI, 1 − min/max of nDCG@10 over answer-position thirds), the harmonic mean over thirds, and 95 % paired-bootstrap
intervals of the changes vs plain. Embeddings are cached under --cache-dir, so an interrupted run resumes where it
stopped. SciFact (no positions; 5,183 abstracts, the slow part) checks that calibration does not cost general
retrieval; by default it is run for the candidates (plain, the paper's, and the configurations meeting the position
constraints).

Configurations with "min_full_baskets=N" calibrate only documents holding at least N full baskets of content tokens;
the others keep their plain embedding. They are scored by combining, per document, the cached calibrated and plain
embeddings (calibration of one document never depends on the others in its batch, so this equals embedding with the
option), which makes the idea free to measure.

The rule that picks the default (DEFAULT_RULE below): PSI ≥ 40 % below plain on SQuAD-v2 dev (512 tokens) and
XQuAD-en, overall nDCG@10 ≥ plain on both, SciFact nDCG@10 ≥ plain − 0.005; among those, the lowest mean PSI over the
two. If none qualifies, the lowest mean PSI among configurations meeting the two nDCG constraints.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import logging
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.evaluation.bootstrap import paired_bootstrap
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.data.load import load_task
from fair_retrieval.evaluation.evaluation_report import display_name
from fair_retrieval.evaluation.models import evaluation_model
from fair_retrieval.evaluation.runner import Evaluator
from fair_retrieval.evaluation.split import calibrated_split
from fair_retrieval.tuning.calibration_search import describe

RULE_DATASETS = ("squad-v2", "xquad:en")
PSI_TARGET = 0.40
SCIFACT_TOLERANCE = 0.005
PAPER = "paper"
PAPER_CONFIG = Calibration.paper()  # the study varies fields of the published configuration
MIN_FULL_BASKETS = (2, 3)
Config = Calibration | None  # None = plain


def first_study_configurations() -> dict[str, Config]:
    """The first study: strengths 0.25/0.5/0.75 × partial_basket × special_tokens at B=128, layers 0.5."""
    configs: dict[str, Config] = {"plain": None, PAPER: Calibration.paper()}
    for strength, partial, special in itertools.product(
        (0.25, 0.5, 0.75), ("equal", "proportional"), ("content", "preserve")
    ):
        calibration = dataclasses.replace(
            PAPER_CONFIG, strength=strength, partial_basket=partial, special_tokens=special
        )
        configs.setdefault(describe(calibration), calibration)
    return configs


def layer_sets(num_layers: int) -> dict[str, tuple[int, ...]]:
    """The layer sets of the study as explicit 0-based index lists: last 1, 2, 3 (half), 4, and all layers."""
    sets = {f"last{k}": tuple(range(num_layers - k, num_layers)) for k in (1, 2, 3, 4) if k <= num_layers}
    sets["all"] = tuple(range(num_layers))
    return sets


def full_space_configurations(num_layers: int) -> dict[str, Config]:
    """One-factor sweeps around the two best configurations of the first passes (λ=0.75, special_tokens="preserve",
    B=128 and B=256).

    Each anchor is varied in basket size {64, 128, 192, 256, 384}, layer set {last 1, 2, 3, 4, all} (index lists),
    strength {0.25, 0.5, 0.65, 0.75, 1.0}, isolated="equal" and partial_basket="proportional"; the paper's
    configuration is measured too. The full grid (thousands of configurations) does not fit two cores, and the first
    study showed the fields interact weakly.
    """
    anchors = (
        dataclasses.replace(PAPER_CONFIG, strength=0.75, basket_size=256, special_tokens="preserve"),
        dataclasses.replace(PAPER_CONFIG, strength=0.75, basket_size=128, special_tokens="preserve"),
    )
    configs: dict[str, Config] = {"plain": None, PAPER: Calibration.paper()}
    for anchor in anchors:
        variants = [dataclasses.replace(anchor, basket_size=b) for b in (64, 128, 192, 256, 384)]
        variants += [dataclasses.replace(anchor, layers=list(s)) for s in layer_sets(num_layers).values()]
        variants += [dataclasses.replace(anchor, strength=x) for x in (0.25, 0.5, 0.65, 0.75, 1.0)]
        variants += [
            dataclasses.replace(anchor, isolated="equal"),
            dataclasses.replace(anchor, partial_basket="proportional"),
        ]
        for calibration in variants:
            if calibration.layers == tuple(range(num_layers - 3, num_layers)):
                calibration = dataclasses.replace(calibration, layers=0.5)  # last 3 of 6 is the paper's share
            configs.setdefault(describe(calibration), calibration)
    return configs


def with_min_full_baskets(configs: dict[str, Config], max_tokens: int) -> dict[str, Config]:
    """Every calibrated configuration also with min_full_baskets = 2 and 3 (scored from cached embeddings), except
    where no document of `max_tokens` tokens could hold that many baskets (the variant would be plain)."""
    out = dict(configs)
    for calibration in configs.values():
        if calibration is None or calibration.min_full_baskets != 1:
            continue
        for n in MIN_FULL_BASKETS:
            variant = dataclasses.replace(calibration, min_full_baskets=n)
            if variant.min_content_tokens < max_tokens:
                out.setdefault(describe(variant), variant)
    return out


def split_labels(text: str) -> list[str]:
    """Comma-separated configuration labels; commas inside an index list ("layers=[4,5]") do not separate."""
    return [label.strip() for label in re.split(r",(?![^\[]*\])", text) if label.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model",
        default=None,
        help="an evaluation model's name (minilm, e5-small) or a folder or Hub id (default: minilm)",
    )
    parser.add_argument("--max-tokens", type=int, default=512, help="default document token budget (default 512)")
    parser.add_argument(
        "--datasets",
        default="squad-v2,xquad:en,squad-v2@256,scifact",
        help="comma-separated --data values, each optionally @BUDGET (default: squad-v2,xquad:en,squad-v2@256,scifact)",
    )
    parser.add_argument(
        "--configs",
        default="full-space",
        help="'full-space' (default), 'first-study', or comma-separated labels of the full space",
    )
    parser.add_argument(
        "--scifact",
        default="candidates",
        help="configurations run on SciFact and squad-v2@256 (the slow part): 'candidates' (plain, paper and "
        "those meeting the position constraints or closest to them), 'all', or comma-separated labels",
    )
    parser.add_argument("--candidates", type=int, default=6, help="at most this many non-preset SciFact candidates")
    parser.add_argument(
        "--extra", action="append", default=[], metavar="JSON", help="an extra configuration as Calibration JSON"
    )
    parser.add_argument("--cache-dir", type=Path, default=Path(".fair_cache"), help="embedding cache")
    parser.add_argument("--output", type=Path, default=Path("runs/quality"), help="folder for quality.json/.md")
    parser.add_argument("--plot", type=Path, help="write the Pareto plot (PSI cut vs ΔnDCG@10) to this PNG")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default=None)
    return parser.parse_args(argv)


def with_minimum(
    evaluator: Evaluator, embedder: FairEmbedder, cache: EmbeddingCache, calibration: Calibration
) -> np.ndarray:
    """Document embeddings as `calibration.min_full_baskets` gives them, assembled from cached pieces: calibrated
    where a document holds at least `calibration.min_content_tokens` content tokens, plain elsewhere. Only those
    documents are embedded calibrated (cached on their own, or taken from the whole corpus embedded with
    min_full_baskets=1), which is what the option itself costs."""
    # min_full_baskets=1 is the same on every document it calibrates, unless λ ramps up from the bar N·B
    base = calibration if calibration.strength_ramp else dataclasses.replace(calibration, min_full_baskets=1)
    texts = list(evaluator.task.corpus.values())
    documents, _ = evaluator.document_embeddings(None)
    documents = documents.copy()
    keep = np.array(embedder.calibrated_texts(texts, calibration))  # the engine's own count of content tokens
    if not keep.any():
        return documents
    full = evaluator.cached_document_embeddings(base)
    if full is not None:  # the whole corpus was embedded with this calibration already: take the long documents
        documents[keep] = full[keep]
        return documents
    chosen = [t for t, k in zip(texts, keep, strict=True) if k]
    description = {
        "kind": "documents-subset",
        "model": str(embedder.model_name),
        "max_length": embedder.max_length,
        "texts": hashlib.sha256("\0".join(chosen).encode("utf-8")).hexdigest()[:16],
        "count": len(chosen),
        "calibration": base.to_dict(),
    }
    calibrated = cache.load(description)
    if calibrated is None:
        calibrated = embedder.embed_documents(chosen, calibration=base, show_progress_bar=True)
        cache.save(description, calibrated)
    documents[keep] = calibrated
    return documents


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    model = evaluation_model(args.model)
    embedder = FairEmbedder(model, max_length=args.max_tokens, batch_size=args.batch_size, device=args.device)
    if args.configs == "first-study":
        configs = first_study_configurations()
    else:
        configs = with_min_full_baskets(full_space_configurations(embedder.num_layers), args.max_tokens)
        if args.configs != "full-space":
            wanted = split_labels(args.configs)
            unknown = [x for x in wanted if x not in configs]
            if unknown:
                raise ValueError(f"--configs names unknown configurations {unknown}.")
            configs = {k: configs[k] for k in ["plain", *wanted]}
    for text in args.extra:
        calibration = Calibration.from_json(text)
        configs.setdefault(describe(calibration), calibration)
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    cache = EmbeddingCache(args.cache_dir)
    results: dict[str, dict[str, Any]] = {}
    report: dict[str, Any] = {
        "model": model,
        "max_tokens": args.max_tokens,
        "configurations": {label: (None if c is None else c.to_dict()) for label, c in configs.items()},
        "results": results,
    }
    started = time.time()
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    for dataset in datasets:
        spec, _, budget = dataset.partition("@")
        max_tokens = int(budget) if budget else args.max_tokens
        task = load_task(spec, embedder.token_lengths, max_tokens)
        evaluator = Evaluator(embedder, task, cache=cache, show_progress_bar=True)
        results[dataset] = {"task": task.summary(), "runs": {}}
        chosen = configs
        if dataset not in RULE_DATASETS and args.scifact != "all":
            if args.scifact == "candidates":
                names = candidates(results, configs, args.candidates)
            else:
                names = ["plain", *split_labels(args.scifact)]
                unknown = [label for label in names if label not in configs]
                if unknown:
                    raise ValueError(f"--scifact names unknown configurations {unknown}; use the labels of --configs.")
            chosen = {label: configs[label] for label in names}
        for label, calibration in chosen.items():
            if calibration is None:
                result = evaluator.run(label, None)
            else:
                if calibration.min_full_baskets > 1:
                    documents, seconds = with_minimum(evaluator, embedder, cache, calibration), 0.0
                else:
                    documents, seconds = evaluator.document_embeddings(calibration)
                result = evaluator.score(label, documents, calibration, seconds)
            scores = {qid: m["ndcg@10"] for qid, m in result.per_query.items()}
            per_query.setdefault(dataset, {})[label] = scores
            intervals: dict[str, Any] = {}
            if label != "plain" and "plain" in per_query[dataset]:
                intervals = paired_bootstrap(per_query[dataset]["plain"], scores, evaluator.grouping)
                if calibration is not None:  # where the change sits: calibrated documents' questions vs the others
                    flags = zip(
                        task.doc_ids, embedder.calibrated_texts(list(task.corpus.values()), calibration), strict=True
                    )
                    split = calibrated_split(per_query[dataset]["plain"], scores, task.qrels, flags)
                    intervals["split"] = {name: side.to_dict() for name, side in split.items()}
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
    if args.plot:
        pareto_plot(report, args.plot)
    print((args.output / "quality.md").read_text(encoding="utf-8"))
    return 0


def position_verdict(results: dict[str, dict[str, Any]], label: str) -> dict[str, Any]:
    """The rule's position part for one configuration: PSI cut and nDCG@10 change on each rule dataset."""
    cuts, deltas, psis = {}, {}, []
    for dataset in RULE_DATASETS:
        runs = results.get(dataset, {}).get("runs", {})
        if label not in runs or "plain" not in runs or not runs["plain"].get("psi"):
            return {}
        plain, run = runs["plain"], runs[label]
        cuts[dataset] = (plain["psi"] - run["psi"]) / plain["psi"]
        deltas[dataset] = run["ndcg@10"] - plain["ndcg@10"]
        psis.append(run["psi"])
    return {
        "psi_cut": cuts,
        "ndcg_delta": deltas,
        "mean_psi": sum(psis) / len(psis),
        "mean_psi_cut": sum(cuts.values()) / len(cuts),
        "mean_ndcg_delta": sum(deltas.values()) / len(deltas),
        "psi_ok": all(c >= PSI_TARGET for c in cuts.values()),
        "ndcg_ok": all(d >= 0.0 for d in deltas.values()),
    }


def candidates(results: dict[str, dict[str, Any]], configs: dict[str, Config], limit: int) -> list[str]:
    """Configurations worth the slow datasets: plain, paper, then those meeting both position constraints (lowest
    mean PSI first), then those meeting the nDCG constraint only (lowest mean PSI first), up to `limit` in all."""
    scored = [(label, position_verdict(results, label)) for label in configs if label not in ("plain", PAPER)]
    scored = [(label, v) for label, v in scored if v and v["ndcg_ok"]]
    scored.sort(key=lambda item: (not item[1]["psi_ok"], item[1]["mean_psi"]))
    return ["plain", PAPER, *[label for label, _ in scored[:limit]]]


def choose_default(report: dict[str, Any]) -> dict[str, Any]:
    """Apply the rule (module docstring) to everything measured; say which configuration wins and why."""
    scifact = report["results"].get("scifact", {}).get("runs", {})
    qualifying, fallback = [], []
    for label in report["configurations"]:
        if label == "plain" or label not in scifact or "plain" not in scifact:
            continue
        verdict = report["verdicts"][label]
        if not verdict or not verdict["ndcg_ok"] or verdict["scifact_delta"] < -SCIFACT_TOLERANCE:
            continue
        (qualifying if verdict["psi_ok"] else fallback).append((verdict["mean_psi"], label))
    pool = qualifying or fallback
    if not pool:
        return {"chosen": None, "qualifying": [], "reason": "no configuration meets the nDCG@10 constraints"}
    chosen = min(pool)[1]
    return {
        "chosen": chosen,
        "qualifying": [label for _, label in sorted(qualifying)],
        "reason": "lowest mean PSI among qualifying configurations"
        if qualifying
        else "none qualifies: lowest mean PSI among configurations meeting the two nDCG@10 constraints",
    }


def _write(report: dict[str, Any], folder: Path, started: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    report["elapsed_seconds"] = round(time.time() - started, 1)
    results = report["results"]
    report["verdicts"] = {}
    for label in report["configurations"]:
        verdict = position_verdict(results, label)
        scifact = results.get("scifact", {}).get("runs", {})
        if verdict and label in scifact and "plain" in scifact:
            verdict["scifact_delta"] = scifact[label]["ndcg@10"] - scifact["plain"]["ndcg@10"]
            verdict["meets_rule"] = (
                verdict["psi_ok"] and verdict["ndcg_ok"] and verdict["scifact_delta"] >= -SCIFACT_TOLERANCE
            )
        report["verdicts"][label] = verdict
    report["choice"] = choose_default(report)
    (folder / "quality.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / "quality.md").write_text(markdown_table(report), encoding="utf-8")


def pareto_plot(report: dict[str, Any], path: Path, floor: float = -0.015) -> Path:
    """Every configuration as a point: mean PSI cut (x) vs mean ΔnDCG@10 (y) over the rule datasets.

    Marker shape says whether short texts are left plain (min_full_baskets > 1); colour says what SciFact said (within
    the tolerance, below it, or not run). Points below `floor` (the destructive ones) are drawn at the floor and
    counted in the title, so they do not squash the interesting part of the plot.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.6), dpi=120)
    chosen = report.get("choice", {}).get("chosen")
    points = [(label, v) for label, v in report["verdicts"].items() if v and label != "plain"]
    colours = {"ok": "#2ca02c", "fails": "#ff7f0e", None: "#9e9e9e"}
    off_scale = 0
    for label, verdict in points:
        x, y = 100 * verdict["mean_psi_cut"], verdict["mean_ndcg_delta"]
        if y < floor:
            off_scale, y = off_scale + 1, floor
        scifact = None
        if "scifact_delta" in verdict:
            scifact = "ok" if verdict["scifact_delta"] >= -SCIFACT_TOLERANCE else "fails"
        minimum = (report["configurations"][label] or {}).get("min_full_baskets", 1)
        style = {"color": colours[scifact], "marker": "^" if minimum > 1 else "o", "s": 28, "alpha": 0.8}
        if label == PAPER:
            style.update(marker="s", s=70, edgecolors="black")
        if label == chosen:
            style.update(marker="*", s=260, edgecolors="black")
        ax.scatter([x], [y], zorder=3, **style)
        if label in (PAPER, chosen):
            name = "paper" if label == PAPER else "default (chosen by the rule)"
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(8, -14), fontsize=9)
    ax.axhline(0, color="#555555", linewidth=0.8)
    ax.axvline(100 * PSI_TARGET, color="#555555", linewidth=0.8, linestyle="--")
    ax.set_ylim(floor - 0.002, None)
    for name, colour in (
        ("SciFact within 0.005 of plain", "ok"),
        ("SciFact lower", "fails"),
        ("SciFact not run", None),
    ):
        ax.scatter([], [], color=colours[colour], marker="o", label=name)
    ax.scatter([], [], color="white", edgecolors="black", marker="o", label="every text calibrated")
    ax.scatter([], [], color="white", edgecolors="black", marker="^", label="min_full_baskets = 2–4")
    ax.set_xlabel("PSI cut vs plain, mean of SQuAD-v2 dev and XQuAD-en (%) — right is fairer")
    ax.set_ylabel("Δ overall nDCG@10 vs plain (mean of the two)")
    title = f"{len(points)} configurations, {display_name(str(report['model']))}; dashed: the 40 % target"
    if off_scale:
        title += f"\n{off_scale} with ΔnDCG@10 below {floor} are drawn at the bottom edge"
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def markdown_table(report: dict[str, Any]) -> str:
    """The README table: one row per configuration, nDCG@10 / PSI per dataset, then the verdict."""
    results = report["results"]
    datasets = list(results)
    header = ["configuration"]
    for dataset in datasets:
        header += [f"{dataset} nDCG@10"] + ([f"{dataset} PSI"] if dataset != "scifact" else [])
    header += ["PSI cut SQuAD / XQuAD-en", "ΔnDCG SQuAD / XQuAD-en", "Δ SciFact", "rule"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label in report["configurations"]:
        cells = [label]
        for dataset in datasets:
            run = results[dataset]["runs"].get(label)
            cells.append(f"{run['ndcg@10']:.4f}" if run else "—")
            if dataset != "scifact":
                cells.append(f"{run['psi']:.4f}" if run and run["psi"] is not None else "—")
        verdict = report["verdicts"].get(label, {})
        if verdict:
            cells.append(" / ".join(f"{verdict['psi_cut'][d]:.0%}" for d in RULE_DATASETS))
            cells.append(" / ".join(f"{verdict['ndcg_delta'][d]:+.4f}" for d in RULE_DATASETS))
        else:
            cells += ["—", "—"]
        cells.append(f"{verdict['scifact_delta']:+.4f}" if "scifact_delta" in verdict else "—")
        mark = (
            "✔" if verdict.get("meets_rule") else ("pos. ✔" if verdict.get("psi_ok") and verdict.get("ndcg_ok") else "")
        )
        cells.append(("**default** " if label == report.get("choice", {}).get("chosen") else "") + mark)
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    choice = report.get("choice", {})
    lines.append(f"Chosen by the rule: {choice.get('chosen')} ({choice.get('reason')}).")
    lines.append("")
    lines += _interval_table(report)
    lines.append(
        f"Model: {display_name(str(report['model']))}, documents of ≤ {report['max_tokens']} tokens; elapsed "
        f"{report.get('elapsed_seconds', 0):.0f} s (embeddings found in the cache are not recomputed). "
        "PSI = 1 − min/max nDCG@10 over begin/middle/end thirds."
    )
    return "\n".join(lines) + "\n"


def _interval_table(report: dict[str, Any]) -> list[str]:
    """Changes vs plain with 95 % paired-bootstrap intervals, per dataset."""
    results = report["results"]
    datasets = list(results)
    header = ["configuration"] + [f"{d} ΔnDCG@10 [95% CI]" for d in datasets]
    header += [f"{d} ΔPSI [95% CI]" for d in datasets if d != "scifact"]
    header += [f"{d} Δ calibrated-doc / other questions" for d in datasets]
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
        for dataset in datasets:
            split = (results[dataset]["runs"].get(label) or {}).get("split")
            cells.append(" / ".join(_split_cell(split[side]) for side in ("calibrated", "plain")) if split else "—")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _split_cell(side: dict[str, Any]) -> str:
    return "—" if side["delta"] is None else f"{side['delta']:+.4f} ({side['questions']})"


if __name__ == "__main__":
    sys.exit(main())
