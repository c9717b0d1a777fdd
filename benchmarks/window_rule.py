"""The window study's rule and report (benchmarks/window_boundaries.py): the candidates' verdicts on intervals, the
pick, the tables of every run and the README's table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval.evaluation.bootstrap import paired_bootstrap

AGGREGATES = ("max", "top2", "max-mean")
BASELINE = "tokens/pooled"  # today's store default
SMALL_TO_BIG = "small-to-big"
ANCHOR = "anchor"  # HuggingFaceEmbedding(s) in the stack's default store
SHIPPED = "shipped-default-store"  # the stores as users build them by default (validates what ships)
RULE = {
    "pooled_gain": 0.04,  # nDCG@10 ≥ token-pooled + 0.04 ...
    "pooled_gain_lower": 0.02,  # ... with the 95 % lower bound above +0.02 (both stacks × squad-v2/reddit × models)
    "scifact_tolerance": 0.005,  # SciFact ≥ token-pooled − 0.005
    "s2b_lower": -0.01,  # vs small-to-big: lower bound above −0.01 on every run ...
    "s2b_mean": 0.01,  # ... and mean change above +0.01
}
RULE_DATASETS = ("squad-v2", "reddit")
STACKS = ("llamaindex", "langchain")


# ---------------------------------------------------------------------------------------------------- the rule


def verdict(models: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The rule over every model's results: for each candidate, whether it meets the pooled part and the
    small-to-big part, and the pick (highest mean nDCG@10 among those meeting both, else the pooled part; a tie to
    fewer vectors)."""
    every = {n for r in models.values() for e in r.values() for n in e.get("runs", {})}
    candidates = sorted(every - {SMALL_TO_BIG, SHIPPED, ANCHOR})
    table: dict[str, Any] = {}
    for name in candidates:
        pooled_ok, s2b_ok, means, vectors, fails = True, True, [], [], []
        for model, results in models.items():
            for dataset in RULE_DATASETS:
                for stack in STACKS:
                    runs = results.get(f"{dataset}/{stack}", {}).get("runs", {})
                    if name not in runs:
                        continue
                    run, base, small = runs[name], runs[BASELINE], runs[SMALL_TO_BIG]
                    groups = results[f"{dataset}/{stack}"].get("groups", {})
                    vs_pooled = paired_bootstrap(base["per_query"], run["per_query"], groups)
                    vs_small = paired_bootstrap(small["per_query"], run["per_query"], {})
                    gain, (lo, _) = _delta(base, run), vs_pooled["ndcg_delta_ci"]
                    if name != BASELINE and (gain < RULE["pooled_gain"] or lo <= RULE["pooled_gain_lower"]):
                        pooled_ok = False
                        fails.append(f"{model} {dataset}/{stack}: vs pooled {gain:+.3f} [{lo:+.3f}]")
                    if name != BASELINE and vs_pooled.get("psi_change_ci", [0.0])[0] > 0:
                        pooled_ok = False
                        fails.append(f"{model} {dataset}/{stack}: PSI above pooled's")
                    s_gain, (s_lo, _) = _delta(small, run), vs_small["ndcg_delta_ci"]
                    means.append(s_gain)
                    if s_lo <= RULE["s2b_lower"]:
                        s2b_ok = False
                        fails.append(f"{model} {dataset}/{stack}: vs small-to-big {s_gain:+.3f} [{s_lo:+.3f}]")
                    vectors.append(run.get("vectors_per_chunk") or 1.0)
            scifact = results.get("scifact", {}).get("runs", {})
            tolerance = RULE["scifact_tolerance"]
            if (
                name in scifact
                and BASELINE in scifact
                and scifact[name]["ndcg@10"] < scifact[BASELINE]["ndcg@10"] - tolerance
            ):
                pooled_ok = False
                fails.append(f"{model} scifact {scifact[name]['ndcg@10']:.3f}")
        if not means:
            continue
        s2b_ok = s2b_ok and float(np.mean(means)) > RULE["s2b_mean"]
        table[name] = {
            "pooled_part": pooled_ok and name != BASELINE,
            "small_to_big_part": s2b_ok,
            "mean_vs_small_to_big": float(np.mean(means)),
            "vectors_per_chunk": float(np.mean(vectors)),
            "fails": fails,
        }
    return table


def _delta(base: dict[str, Any], run: dict[str, Any]) -> float:
    """Mean paired nDCG@10 change of `run` over `base` (the same queries)."""
    return float(np.mean([run["per_query"][q] - v for q, v in base["per_query"].items()]))


def mean_ndcg(models: dict[str, dict[str, Any]], name: str) -> float:
    values = [
        r[f"{d}/{s}"]["runs"][name]["ndcg@10"]
        for r in models.values()
        for d in RULE_DATASETS
        for s in STACKS
        if name in r.get(f"{d}/{s}", {}).get("runs", {})
    ]
    return float(np.mean(values)) if values else float("nan")


def pick(models: dict[str, dict[str, Any]], table: dict[str, Any]) -> tuple[str | None, str]:
    both = [n for n, v in table.items() if v["pooled_part"] and v["small_to_big_part"]]
    pool = both or [n for n, v in table.items() if v["pooled_part"]]
    if not pool:
        return None, "none"
    best = max(pool, key=lambda n: (round(mean_ndcg(models, n), 3), -table[n]["vectors_per_chunk"]))
    return best, "both parts" if both else "pooled part only"


def readme_table(models: dict[str, dict[str, Any]], default: str) -> str:
    """The README's first table: per model and run, the anchor, the stack's small-to-big and the default store
    (`SHIPPED` where it was run, else the rule's pick `default`), with the change vs small-to-big."""
    lines = [
        "| model | documents → pipeline | HuggingFaceEmbedding(s) | the stack's small-to-big | our default store | "
        "Δ vs small-to-big [95 % CI] | vectors per chunk |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, results in models.items():
        for key, entry in results.items():
            runs = entry.get("runs", {})
            ours = runs.get(SHIPPED) or runs.get(default)
            if key == "scifact" or ours is None or SMALL_TO_BIG not in runs:
                continue
            small = runs[SMALL_TO_BIG]
            lo, hi = paired_bootstrap(small["per_query"], ours["per_query"], {})["ndcg_delta_ci"]
            anchor = f"{runs[ANCHOR]['ndcg@10']:.3f}" if ANCHOR in runs else "—"
            lines.append(
                f"| {model} | {key} ({entry['questions']} questions) | {anchor} | {small['ndcg@10']:.3f} | "
                f"**{ours['ndcg@10']:.3f}** | {_delta(small, ours):+.3f} [{lo:+.3f}, {hi:+.3f}] | "
                f"{ours.get('vectors_per_chunk') or 0:.1f} |"
            )
    return "\n".join(lines)


def report(folders: list[str]) -> str:
    """The markdown tables of every run and the rule's verdict, from the results of `folders` (one per model)."""
    models = {Path(f).name: json.loads((Path(f) / "results.json").read_text()) for f in folders}
    lines = []
    for model, results in models.items():
        lines += [
            f"### {model}",
            "",
            "| data → stack | run | nDCG@10 | Δ vs token-pooled [95 % CI] | "
            "Δ vs small-to-big [95 % CI] | PSI | vectors/chunk | index MB | build s | p50 / p95 ms |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for key, entry in results.items():
            if key == "scifact":
                continue
            runs = entry["runs"]
            for name, run in runs.items():
                cells = []
                for base in (BASELINE, SMALL_TO_BIG):
                    if base in runs and name != base:
                        b = paired_bootstrap(runs[base]["per_query"], run["per_query"], {})
                        lo, hi = b["ndcg_delta_ci"]
                        cells.append(f"{_delta(runs[base], run):+.3f} [{lo:+.3f}, {hi:+.3f}]")
                    else:
                        cells.append("")
                size = run.get("index_bytes")
                lines.append(
                    f"| {key} ({entry['documents']} docs, {entry['chunks']} chunks, {entry['questions']} q) | {name} | "
                    f"{run['ndcg@10']:.3f} | {cells[0]} | {cells[1]} | {run['psi']:.2f} | "
                    f"{run.get('vectors_per_chunk') or 0:.2f} | {'' if size is None else f'{size / 1e6:.2f}'} | "
                    f"{run.get('build_s', 0):.1f} | {run.get('latency_ms_p50', 0):.2f} / "
                    f"{run.get('latency_ms_p95', 0):.2f} |"
                )
        scifact = results.get("scifact", {}).get("runs", {})
        if scifact:
            lines += ["", "SciFact nDCG@10: " + ", ".join(f"{n} {r['ndcg@10']:.4f}" for n, r in scifact.items())]
        lines.append("")
    table = verdict(models)
    best, how = pick(models, table)
    header = "| candidate | mean nDCG@10 | pooled part | small-to-big part | mean Δ vs small-to-big | vectors | fails |"
    lines += ["### The rule", "", header, "|---|---|---|---|---|---|---|"]
    for name, v in sorted(table.items(), key=lambda kv: -mean_ndcg(models, kv[0])):
        lines.append(
            f"| {name} | {mean_ndcg(models, name):.3f} | {'yes' if v['pooled_part'] else 'no'} | "
            f"{'yes' if v['small_to_big_part'] else 'no'} | {v['mean_vs_small_to_big']:+.3f} | "
            f"{v['vectors_per_chunk']:.2f} | {'; '.join(v['fails'][:6])}{' …' if len(v['fails']) > 6 else ''} |"
        )
    lines += ["", f"Pick: **{best}** ({how}).", "", "### README table", "", readme_table(models, best or "")]
    return "\n".join(lines)
