"""Validate label-free tuning as shipped, and the configurations it may choose, on held-out position sets.

    python benchmarks/label_free.py                      # squad-v2, reddit (first 300 documents), needle; MiniLM
    python benchmarks/label_free.py --datasets needle    # a quick run
    python benchmarks/label_free.py --model e5-small --pool trust-region   # the shipped tuner on another model

Three position sets from three sources: SQuAD-v2 dev (Wikipedia), SQuADShifts reddit (posts) and the needle set
(Python's documentation with planted facts), all at 512 tokens. For each one:

1. **The pool**: plain, the paper's configuration, and the first round of the CLI's coordinate search — the library
   default with one field changed to each value of `SearchSpace()` (the space `fair-retrieval tune` searches;
   isolated="equal", which loses 0.14–0.42 nDCG@10, left out) — plus the configuration the unguarded tuner picked on
   held-out data (strength 0.75, basket 64, all layers, proportional partial baskets). Every configuration embeds the
   corpus once (cached) and is scored twice on those vectors: with label-free probes (`probe_task_for` with the CLI's
   probe budget, never shown a question) and with the real questions. Per configuration: nDCG@10, PSI, harmonic mean,
   the share of documents it calibrates, the per-question split (questions whose relevant document it calibrated vs
   the others), how much higher calibrated documents score against the queries than their plain vectors (the two
   score populations), and the stability of each document's 10 nearest documents (plain vs calibrated).
2. **Leave one dataset out**: the trust region a labelled dev set supports (ΔnDCG@10 ≥ −0.002 on every labelled set,
   having calibrated some of its documents) is built from the *other two* datasets, label-free selection (probes)
   runs inside it, and the choice is scored on the held-out one; next to it, the same selection without the trust
   region (probes alone).
3. **As shipped**: `fair-retrieval tune --data docs.jsonl` (the CLI, in-process, with its own defaults) on the
   corpus written as JSONL; its saved choice (or plain when it saves none) is scored with the real questions.

Spearman's ρ between probe and question harmonic means over the pool, per dataset (scipy). Results:
runs/label_free/{results.json,label_free.md}. About 45 minutes on 2 CPU cores from an empty cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from fair_retrieval import Calibration
from fair_retrieval.cli import build_parser
from fair_retrieval.cli import main as cli_main
from fair_retrieval.cli.common import make_embedder
from fair_retrieval.evaluation.bootstrap import paired_bootstrap
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.data.load import load_task
from fair_retrieval.evaluation.data.task import RetrievalTask
from fair_retrieval.evaluation.models import evaluation_model
from fair_retrieval.evaluation.probes import probe_task_for
from fair_retrieval.evaluation.runner import PRIMARY, Evaluator, RunResult
from fair_retrieval.evaluation.split import calibrated_split
from fair_retrieval.tuning.calibration_search import (
    SEARCH_FIELDS,
    TRUST_REGION,
    SearchSpace,
    Trial,
    describe,
    select_best,
)

NDCG_TOLERANCE = 0.002  # the largest nDCG@10 loss a choice may cost on held-out data
PSI_CUT_TARGET = 0.35  # … while cutting PSI by at least this share (or answering plain)
DATASETS = ("squad-v2", "reddit", "needle")
OUTPUT = Path("runs/label_free")


# Centre of the pool: the library default when the study was run (λ = 0.75). Its strength neighbours include the
# present default (λ = 0.5), which this study chose; centring on it keeps the cached embeddings valid.
CENTRE = Calibration(strength=0.75)
RULE_PSI_CUT = 0.40  # the default's rule: PSI ≥ 40 % below plain on squad-v2 and reddit, nDCG@10 ≥ plain on both


def pool() -> list[Calibration | None]:
    """Plain, the paper, the centre, its one-field neighbours over `SearchSpace()`, and the unguarded pick."""
    default = CENTRE
    configs: list[Calibration | None] = [None, Calibration.paper(), default]
    space = SearchSpace()
    for name in SEARCH_FIELDS:
        for value in space.values(name):
            if name == "isolated" and value == "equal":
                continue  # costs 0.14–0.42 nDCG@10 on SQuAD and XQuAD (docs/quality_study.md): not a candidate
            candidate = dataclasses.replace(default, **{name: value})
            if candidate not in configs:
                configs.append(candidate)
    unguarded = dataclasses.replace(default, basket_size=64, layers=1.0, partial_basket="proportional")
    if unguarded not in configs:
        configs.append(unguarded)
    return configs


def first_documents(task: RetrievalTask, n: int | None) -> RetrievalTask:
    """The task restricted to its first `n` documents and the questions whose relevant documents are among them."""
    if n is None or n >= len(task.corpus):
        return task
    kept = set(task.doc_ids[:n])
    ids = [q for q in task.query_ids if set(task.qrels[q]) <= kept]
    return RetrievalTask(
        name=f"{task.name}[:{n}]",
        corpus={d: task.corpus[d] for d in task.doc_ids[:n]},
        queries={q: task.queries[q] for q in ids},
        qrels={q: task.qrels[q] for q in ids},
        positions={q: task.positions[q] for q in ids if q in task.positions},
        labels={q: task.labels[q] for q in ids if q in task.labels},
        doc_tokens={d: v for d, v in task.doc_tokens.items() if d in kept} if task.doc_tokens else task.doc_tokens,
        info={**task.info, "first_documents": n},
    )


def neighbour_stability(plain: np.ndarray, other: np.ndarray, k: int = 10) -> float:
    """Mean overlap of each document's k nearest documents (itself excluded) under two embeddings of the corpus."""

    def top(x: np.ndarray) -> np.ndarray:
        sims = x @ x.T
        np.fill_diagonal(sims, -np.inf)
        return np.argsort(-sims, axis=1)[:, :k]

    a, b = top(plain), top(other)
    return float(np.mean([len(set(a[i]) & set(b[i])) / k for i in range(len(a))]))


def psi_cut(plain: float | None, other: float | None) -> float | None:
    """Relative PSI reduction (positive = fairer)."""
    return None if plain is None or other is None or plain == 0 else (plain - other) / plain


def describe_run(
    run: RunResult,
    plain: RunResult,
    task: RetrievalTask,
    evaluator: Evaluator,
    calibrated: list[bool] | None,
    documents: np.ndarray,
    plain_documents: np.ndarray,
) -> dict[str, Any]:
    """Scores, intervals, the calibrated/plain split and the score-population shift of one run against plain."""
    base = {q: m[PRIMARY] for q, m in plain.per_query.items()}
    mine = {q: m[PRIMARY] for q, m in run.per_query.items()}
    row: dict[str, Any] = {
        "ndcg": run.overall[PRIMARY],
        "psi": run.psi,
        "hm": run.harmonic_mean,
        "groups": {g: m[PRIMARY] for g, m in run.groups.items()},
        "delta": run.overall[PRIMARY] - plain.overall[PRIMARY],
        "psi_cut": psi_cut(plain.psi, run.psi),
        **paired_bootstrap(base, mine, evaluator.grouping),
    }
    if calibrated is not None:
        row["calibrated_share"] = float(np.mean(calibrated))
        split = calibrated_split(base, mine, task.qrels, zip(task.doc_ids, calibrated, strict=True))
        row["split"] = {name: side.to_dict() for name, side in split.items()}
        mask = np.array(calibrated)
        if mask.any():
            queries = evaluator.query_embeddings()
            shift = (documents[mask] - plain_documents[mask]).mean(axis=0)
            row["score_shift"] = float(queries.mean(axis=0) @ shift)  # mean cosine gain of calibrated documents
        row["stability"] = neighbour_stability(plain_documents, documents)
    return row


def study(dataset: str, args: argparse.Namespace, cache: EmbeddingCache, workdir: Path) -> dict[str, Any]:
    """Pool scores (probes and questions) and the CLI's own choice on one dataset."""
    model = evaluation_model(args.model)
    cli_args = build_parser().parse_args(["tune", "--max-tokens", "512", "--model", model])
    embedder = make_embedder(cli_args)
    task = load_task(dataset, embedder.token_lengths, 512, needle_documents=cli_args.needle_documents)
    task = first_documents(task, args.reddit_documents if dataset == "reddit" else None)
    probes = probe_task_for(task.corpus, embedder, max_probes=cli_args.max_probes, seed=cli_args.probe_seed)
    real = Evaluator(embedder, task, cache=cache, show_progress_bar=True)
    probe = Evaluator(embedder, probes, cache=cache, show_progress_bar=True)
    plain_documents, _ = real.document_embeddings(None)
    plain_real, plain_probe = real.score("plain", plain_documents), probe.score("plain", plain_documents)
    texts = list(task.corpus.values())
    rows = []
    for calibration in pool() if args.pool == "study" else [None, *TRUST_REGION]:
        documents, _ = real.document_embeddings(calibration)
        calibrated = None if calibration is None else embedder.calibrated_texts(texts, calibration)
        question = real.score(describe(calibration), documents, calibration)
        probed = probe.score(describe(calibration), documents, calibration)
        rows.append(
            {
                "label": describe(calibration),
                "calibration": None if calibration is None else calibration.to_dict(),
                "questions": describe_run(question, plain_real, task, real, calibrated, documents, plain_documents),
                "probes": describe_run(probed, plain_probe, probes, probe, None, documents, plain_documents),
            }
        )
        logging.info(
            "%s %s: questions nDCG %.4f PSI %s; probes nDCG %.4f HM %.4f",
            dataset,
            rows[-1]["label"],
            question.overall[PRIMARY],
            question.psi,
            probed.overall[PRIMARY],
            probed.harmonic_mean or 0,
        )
    shipped = None if args.skip_cli else run_cli_tune(dataset, task, workdir, args.cache_dir, model)
    if shipped is not None and all(r["calibration"] != shipped.to_dict() for r in rows):
        documents, _ = real.document_embeddings(shipped)
        run = real.score(describe(shipped), documents, shipped)
        cal = embedder.calibrated_texts(texts, shipped)
        rows.append(
            {
                "label": describe(shipped),
                "calibration": shipped.to_dict(),
                "questions": describe_run(run, plain_real, task, real, cal, documents, plain_documents),
                "probes": describe_run(
                    probe.score(describe(shipped), documents, shipped),
                    plain_probe,
                    probes,
                    probe,
                    None,
                    documents,
                    plain_documents,
                ),
            }
        )
    return {
        "dataset": task.name,
        "documents": len(task.corpus),
        "questions": len(task.queries),
        "probes": len(probes.queries),
        "shipped_choice": "not run" if args.skip_cli else "plain" if shipped is None else describe(shipped),
        "rows": rows,
    }


def run_cli_tune(dataset: str, task: RetrievalTask, workdir: Path, cache_dir: Path, model: str) -> Calibration | None:
    """`fair-retrieval tune --data docs.jsonl` exactly as a user runs it; its saved choice, or None (plain)."""
    corpus = workdir / f"{dataset}.jsonl"
    with corpus.open("w", encoding="utf-8") as handle:
        for doc_id, text in task.corpus.items():
            handle.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    output = workdir / f"{dataset}-calibration.json"
    argv = ["tune", "--data", str(corpus), "--max-tokens", "512", "--cache-dir", str(cache_dir), "--model", model]
    argv += ["--output", str(output), "--report-dir", str(workdir / "tune")]
    code = cli_main(argv)
    if code != 0:
        raise RuntimeError(f"fair-retrieval tune exited with {code} on {dataset}.")
    return Calibration.load(output) if output.exists() else None


def trials(rows: Sequence[dict[str, Any]], side: str) -> list[Trial]:
    """The rows as tuner `Trial`s scored on probes or questions."""
    out = []
    for row in rows:
        scores = row[side]
        calibration = None if row["calibration"] is None else Calibration(**row["calibration"])
        out.append(Trial(calibration, scores["ndcg"], scores["hm"], scores["psi"], scores["groups"]))
    return out


def supported(results: Sequence[dict[str, Any]], label: str) -> bool:
    """True when every labelled set in `results` loses at most NDCG_TOLERANCE with configuration `label`."""
    for result in results:
        row = next((r for r in result["rows"] if r["label"] == label), None)
        if row is None or row["questions"]["delta"] < -NDCG_TOLERANCE:
            return False
        if not row["questions"].get("calibrated_share"):
            return False  # it changed nothing here (texts too short for it): no evidence either way
    return True


def choose_by_probes(rows: Sequence[dict[str, Any]], allowed: set[str] | None) -> dict[str, Any]:
    """The tuner's rule on probes (highest probe harmonic mean with probe nDCG@10 ≥ plain), inside `allowed`."""
    candidates = [r for r in rows if allowed is None or r["label"] in allowed or r["label"] == "plain"]
    probe_trials = trials(candidates, "probes")
    best = select_best(probe_trials, probe_trials[0])
    return candidates[probe_trials.index(best)]


def leave_one_out(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per held-out dataset: the trust region from the others, the guarded and unguarded choices, their outcome."""
    out = []
    for held in results:
        others = [r for r in results if r is not held]
        pool_rows = [r for r in held["rows"] if r["label"] in {x["label"] for x in others[0]["rows"]}]
        region = {r["label"] for r in pool_rows if r["label"] != "plain" and supported(others, r["label"])}
        for name, allowed in (("trust region", region), ("probes alone", None)):
            choice = choose_by_probes(pool_rows, allowed)
            q = choice["questions"]
            out.append(
                {
                    "held_out": held["dataset"],
                    "selection": name,
                    "region": sorted(region) if allowed is not None else None,
                    "choice": choice["label"],
                    "delta": q["delta"],
                    "ci": q["ndcg_delta_ci"],
                    "psi_cut": q["psi_cut"],
                    "meets": choice["label"] == "plain"
                    or (q["delta"] >= -NDCG_TOLERANCE and (q["psi_cut"] or 0) >= PSI_CUT_TARGET),
                }
            )
    return out


def rule_table(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The default's rule on squad-v2 and reddit: who qualifies, and the choice (with the fallback when none does).

    Qualifies: PSI ≥ 40 % below plain and nDCG@10 ≥ plain on both (point estimates); the choice is the lowest mean
    PSI among those. When none qualifies: among configurations losing at most NDCG_TOLERANCE on both (the tuner's
    held-out tolerance), the largest smaller PSI cut of the two. SciFact (≥ plain − 0.005) is checked apart.
    """
    sets = [r for r in results if r["dataset"].split("@")[0] in ("squad-v2", "reddit")]
    if len(sets) != 2:
        return []
    labels = [row["label"] for row in sets[0]["rows"] if row["label"] != "plain"]
    table = []
    for label in labels:
        rows = [next((x for x in r["rows"] if x["label"] == label), None) for r in sets]
        if any(row is None for row in rows):
            continue
        q = [row["questions"] for row in rows if row is not None]
        cuts, deltas = [x["psi_cut"] or 0.0 for x in q], [x["delta"] for x in q]
        table.append(
            {
                "label": label,
                "cuts": cuts,
                "deltas": deltas,
                "mean_psi": float(np.mean([x["psi"] for x in q])),
                "qualifies": min(cuts) >= RULE_PSI_CUT and min(deltas) >= 0,
                "eligible": min(deltas) >= -NDCG_TOLERANCE,
            }
        )
    qualified = [t for t in table if t["qualifies"]]
    fallback = [t for t in table if t["eligible"]]
    chosen = (
        min(qualified, key=lambda t: t["mean_psi"])
        if qualified
        else max(fallback, key=lambda t: min(t["cuts"]))
        if fallback
        else None
    )
    for t in table:
        t["chosen"] = t is chosen
    return sorted(table, key=lambda t: t["mean_psi"])


def spearman(result: dict[str, Any]) -> dict[str, float]:
    """ρ between probe and question harmonic means (and nDCG@10) over the pool."""
    rows = result["rows"]
    hm = spearmanr([r["probes"]["hm"] for r in rows], [r["questions"]["hm"] for r in rows])
    ndcg = spearmanr([r["probes"]["ndcg"] for r in rows], [r["questions"]["ndcg"] for r in rows])
    return {"hm": float(hm.statistic), "hm_p": float(hm.pvalue), "ndcg": float(ndcg.statistic)}


def render(results: Sequence[dict[str, Any]], loo: Sequence[dict[str, Any]]) -> str:
    """The Markdown tables of the study."""
    lines = ["# Label-free tuning on held-out position sets", ""]
    for result in results:
        rho = spearman(result)
        lines += [
            f"## {result['dataset']}: {result['documents']} documents, {result['questions']} questions, "
            f"{result['probes']} probes",
            "",
            f"`fair-retrieval tune --data docs.jsonl` (as shipped) chose: **{result['shipped_choice']}**. "
            f"Spearman ρ(probe HM, question HM) = {rho['hm']:.2f} (p = {rho['hm_p']:.3f}); "
            f"ρ(probe nDCG, question nDCG) = {rho['ndcg']:.2f}.",
            "",
            "| configuration | ΔnDCG@10 [95% CI] | PSI cut | calibrated docs | Δ calibrated-doc questions | Δ other "
            "questions | score shift | kNN stability | probe ΔnDCG | probe HM |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in result["rows"]:
            q, p = row["questions"], row["probes"]
            split = q.get("split", {})

            def part(name: str, split: dict[str, Any] = split) -> str:
                s = split.get(name)
                return "—" if not s or s["delta"] is None else f"{s['delta']:+.4f} ({s['questions']})"

            lo, hi = q["ndcg_delta_ci"]
            lines.append(
                f"| {row['label']} | {q['delta']:+.4f} [{lo:+.4f}, {hi:+.4f}] | {_pct(q['psi_cut'])} | "
                f"{_pct(q.get('calibrated_share'))} | {part('calibrated')} | {part('plain')} | "
                f"{_num(q.get('score_shift'))} | {_num(q.get('stability'))} | {p['delta']:+.4f} | {_num(p['hm'])} |"
            )
        lines.append("")
    lines += [
        "## Leave one dataset out",
        "",
        f"Target on the held-out set: ΔnDCG@10 ≥ −{NDCG_TOLERANCE} and PSI ≥ {PSI_CUT_TARGET:.0%} below plain, or "
        "plain. Trust region: configurations losing ≤ 0.002 nDCG@10 on both other sets.",
        "",
        "| held out | selection | chosen | ΔnDCG@10 [95% CI] | PSI cut | target |",
        "|---|---|---|---|---|---|",
    ]
    for row in loo:
        lo, hi = row["ci"]
        lines.append(
            f"| {row['held_out']} | {row['selection']} | {row['choice']} | {row['delta']:+.4f} [{lo:+.4f}, {hi:+.4f}] "
            f"| {_pct(row['psi_cut'])} | {'✔' if row['meets'] else '✘'} |"
        )
    rule = rule_table(results)
    if rule:
        lines += [
            "",
            "## The default's rule (squad-v2 and reddit)",
            "",
            f"Qualifies: PSI ≥ {RULE_PSI_CUT:.0%} below plain and nDCG@10 ≥ plain on both; the lowest mean PSI of "
            f"those is chosen. If none qualifies: among those losing ≤ {NDCG_TOLERANCE} on both, the largest "
            "smaller PSI cut.",
            "",
            "| configuration | squad-v2 PSI cut / ΔnDCG@10 | reddit PSI cut / ΔnDCG@10 | mean PSI | rule |",
            "|---|---|---|---|---|",
        ]
        for t in rule:
            verdict = (
                "**chosen**"
                if t["chosen"]
                else "qualifies"
                if t["qualifies"]
                else "≤ 0.002 loss"
                if t["eligible"]
                else ""
            )
            lines.append(
                f"| {t['label']} | {_pct(t['cuts'][0])} / {t['deltas'][0]:+.4f} | {_pct(t['cuts'][1])} / "
                f"{t['deltas'][1]:+.4f} | {t['mean_psi']:.4f} | {verdict} |"
            )
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="an evaluation model's name (minilm, e5-small) or a folder")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated position sets")
    parser.add_argument("--reddit-documents", type=int, default=300, help="first N reddit documents (default 300)")
    parser.add_argument("--cache-dir", type=Path, default=OUTPUT / "cache", help="embedding cache")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="results folder")
    parser.add_argument("--skip-cli", action="store_true", help="score the pool only (no `fair-retrieval tune` run)")
    parser.add_argument(
        "--pool",
        choices=["study", "trust-region"],
        default="study",
        help="study: the pool above; trust-region: plain and the shipped TRUST_REGION only (what `tune` chooses "
        "among), a quick check of the shipped tuner on another model",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.output.mkdir(parents=True, exist_ok=True)
    cache = EmbeddingCache(args.cache_dir)
    results = []
    with tempfile.TemporaryDirectory() as work:
        for dataset in args.datasets.split(","):
            results.append(study(dataset.strip(), args, cache, Path(work)))
            (args.output / "results.json").write_text(json.dumps({"results": results}, indent=1) + "\n")
    loo = leave_one_out(results) if len(results) >= 3 else []
    payload = {
        "results": results,
        "leave_one_out": loo,
        "rule": rule_table(results),
        "spearman": {r["dataset"]: spearman(r) for r in results},
    }
    (args.output / "results.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    text = render(results, loo)
    (args.output / "label_free.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
