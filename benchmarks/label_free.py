"""Validate label-free tuning: tune on probes built from a corpus with its questions hidden, score with the questions.

    python benchmarks/label_free.py                           # SQuAD v2 dev and XQuAD-en at 512 tokens (MiniLM)
    python benchmarks/label_free.py --datasets xquad:en --max-probes 300

For each dataset the same configurations are scored twice over the same document embeddings (cached, so each is
embedded once): with label-free probes (`fair_retrieval.tuning.probe_task_for`, never shown a question) and with the
dataset's real questions. It reports

* the configuration label-free tuning picks (highest probe harmonic mean with probe nDCG@10 ≥ plain), and what it
  does on the real questions: PSI cut relative to plain, Δ overall nDCG@10 (with 95 % paired-bootstrap intervals);
* the best labelled configuration (the same rule on the real questions) and its PSI cut;
* the share of the best labelled PSI cut that the label-free choice achieves (target ≥ 0.8) and its ΔnDCG@10
  (target ≥ −0.002);
* Spearman's rank correlation between probe and question harmonic means over all configurations (scipy).

Results go to --output (JSON) and a table on stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.evaluation.bundled import bundled_model
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.probes import DEFAULT_DROP, probe_task_for
from fair_retrieval.evaluation.runner import PRIMARY, Evaluator
from fair_retrieval.evaluation.sources import load_task
from fair_retrieval.evaluation.squad import tokenizer_counter
from fair_retrieval.tuning import Trial, describe, select_best, trial_from_run

PSI_SHARE_TARGET = 0.8
NDCG_TOLERANCE = 0.002


def configurations() -> list[Calibration | None]:
    """Plain and 16 calibrations: strength × special_tokens × basket size (layers 0.5)."""
    configs: list[Calibration | None] = [None]
    for strength, special, basket in itertools.product((0.25, 0.5, 0.75, 1.0), ("content", "preserve"), (128, 256)):
        configs.append(
            dataclasses.replace(Calibration.paper(), strength=strength, special_tokens=special, basket_size=basket)
        )
    return configs


def bootstrap(values: np.ndarray, rounds: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of the mean of per-query differences."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(rounds, len(values)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def psi_cut(plain: Trial, other: Trial) -> float:
    assert plain.psi is not None and other.psi is not None
    return (plain.psi - other.psi) / plain.psi


def study(
    dataset: str, embedder: FairEmbedder, cache: EmbeddingCache, max_probes: int, seed: int, drop: float
) -> dict[str, Any]:
    task = load_task(dataset, tokenizer_counter(embedder.tokenizer), max_tokens=512)
    probes = probe_task_for(
        task.corpus, embedder, max_probes=max_probes, seed=seed, name=f"probes:{dataset}", drop=drop
    )
    if probes.doc_ids != task.doc_ids:
        raise ValueError(f"{dataset}: the probe corpus differs from the task corpus (empty documents?).")
    real = Evaluator(embedder, task, cache=cache, show_progress_bar=True)
    probe = Evaluator(embedder, probes, cache=cache, show_progress_bar=True)
    rows = []
    for calibration in configurations():
        documents, _ = real.document_embeddings(calibration)  # one embedding serves both (same corpus)
        label = describe(calibration)
        rows.append(
            (
                label,
                trial_from_run(probe.score(label, documents, calibration)),
                real.score(label, documents, calibration),
            )
        )
        logging.info(
            "%s %s: probe HM %.4f, question HM %.4f",
            dataset,
            label,
            rows[-1][1].harmonic_mean or 0,
            rows[-1][2].harmonic_mean or 0,
        )
    probe_trials = [r[1] for r in rows]
    real_trials = [trial_from_run(r[2]) for r in rows]
    chosen_index = probe_trials.index(select_best(probe_trials, probe_trials[0]))
    best_index = real_trials.index(select_best(real_trials, real_trials[0]))
    plain_real, chosen_real, best_real = real_trials[0], real_trials[chosen_index], real_trials[best_index]
    per_query_delta = np.array(
        [rows[chosen_index][2].per_query[q][PRIMARY] - rows[0][2].per_query[q][PRIMARY] for q in task.queries]
    )
    rho = spearmanr([t.harmonic_mean for t in probe_trials], [t.harmonic_mean for t in real_trials])
    best_cut = psi_cut(plain_real, best_real)
    chosen_cut = psi_cut(plain_real, chosen_real)
    return {
        "dataset": dataset,
        "documents": len(task.corpus),
        "questions": len(task.queries),
        "probes": len(probes.queries),
        "probe_info": probes.info,
        "configurations": len(rows),
        "chosen_by_probes": rows[chosen_index][0],
        "chosen_real_psi_cut": chosen_cut,
        "chosen_real_ndcg_delta": float(per_query_delta.mean()),
        "chosen_real_ndcg_delta_ci95": bootstrap(per_query_delta),
        "best_labelled": rows[best_index][0],
        "best_labelled_psi_cut": best_cut,
        "share_of_best_psi_cut": chosen_cut / best_cut if best_cut > 0 else None,
        "spearman_probe_vs_question_hm": float(rho.statistic),
        "spearman_p_value": float(rho.pvalue),
        "meets_target": bool(
            best_cut > 0 and chosen_cut / best_cut >= PSI_SHARE_TARGET and per_query_delta.mean() >= -NDCG_TOLERANCE
        ),
        "rows": [
            {
                "configuration": label,
                "probe_ndcg": p.ndcg,
                "probe_hm": p.harmonic_mean,
                "probe_psi": p.psi,
                "question_ndcg": r.overall[PRIMARY],
                "question_hm": r.harmonic_mean,
                "question_psi": r.psi,
            }
            for label, p, r in rows
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--datasets", default="squad-v2,xquad:en", help="comma-separated position datasets")
    parser.add_argument("--max-probes", type=int, default=600, help="probe budget per dataset")
    parser.add_argument("--seed", type=int, default=0, help="probe seed")
    parser.add_argument(
        "--drop", type=float, default=DEFAULT_DROP, help="share of a sentence's words left out of its probe"
    )
    parser.add_argument("--cache-dir", type=Path, default=Path(".fair_cache"), help="embedding cache")
    parser.add_argument("--output", type=Path, default=Path("runs/label_free.json"), help="JSON results")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    embedder = FairEmbedder(args.model or bundled_model(), max_length=512)
    cache = EmbeddingCache(args.cache_dir)
    results = [
        study(d.strip(), embedder, cache, args.max_probes, args.seed, args.drop) for d in args.datasets.split(",")
    ]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for r in results:
        print(
            f"\n{r['dataset']}: {r['documents']} documents, {r['questions']} questions, {r['probes']} probes, "
            f"{r['configurations']} configurations"
        )
        print(f"  {'configuration':42s} {'probe HM':>9s} {'quest. HM':>9s} {'probe PSI':>9s} {'quest. PSI':>10s}")
        for row in r["rows"]:
            print(
                f"  {row['configuration']:42s} {row['probe_hm']:9.4f} {row['question_hm']:9.4f} "
                f"{row['probe_psi']:9.4f} {row['question_psi']:10.4f}"
            )
        low, high = r["chosen_real_ndcg_delta_ci95"]
        print(
            f"  label-free choice: {r['chosen_by_probes']} → real PSI cut {r['chosen_real_psi_cut']:.1%}, "
            f"ΔnDCG@10 {r['chosen_real_ndcg_delta']:+.4f} [{low:+.4f}, {high:+.4f}]"
        )
        print(f"  best labelled:     {r['best_labelled']} → PSI cut {r['best_labelled_psi_cut']:.1%}")
        share = r["share_of_best_psi_cut"]
        print(
            f"  share of best cut: {'n/a' if share is None else f'{share:.2f}'}; Spearman ρ(probe HM, question HM) "
            f"= {r['spearman_probe_vs_question_hm']:.2f} (p={r['spearman_p_value']:.3f}); "
            f"target met: {r['meets_target']}"
        )
    print(f"\nresults: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
