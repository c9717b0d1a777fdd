"""The pipelines benchmark's report: the window-policy and multi-vector rules applied to the results, the Markdown
tables (the study's and the README's) and the plot (benchmarks/pipelines.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pipelines_data import (
    ANCHOR,
    CANDIDATES,
    DEFAULT_PIPELINES,
    LABELS,
    MULTIVECTOR,
    MULTIVECTOR_CALIBRATED,
    MV_GAIN,
    NDCG_GAIN,
    OURS,
    POOLED,
    POOLED_STORE,
    PSI_CUT,
    RULE_DATASETS,
    SCIFACT_TOLERANCE,
    SMALL_TO_BIG,
    SMALL_TO_BIG_LABELS,
    TIE_ORDER,
)

from fair_retrieval.evaluation.bootstrap import paired_bootstrap

# ---------------------------------------------------------------------------------------------------- report


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    """Intervals vs the anchor for every run, and the rule's verdict for every candidate."""
    for key, entry in results.items():
        if key == "scifact" or ANCHOR not in entry["runs"]:
            continue
        anchor = entry["runs"][ANCHOR]
        groups: dict[str, list[str]] = {}
        for qid, third in entry["chunk_third"].items():
            groups.setdefault(str(third), []).append(qid)
        for name, run in entry["runs"].items():
            if name == ANCHOR:
                continue
            run["vs_anchor"] = paired_bootstrap(anchor["per_query"], run["per_query"], groups)
            run["ndcg_gain"] = run["ndcg@10"] - anchor["ndcg@10"]
            run["psi_cut"] = 1 - run["psi"] / max(anchor["psi"], 1e-12)
            pooled = entry["runs"].get(POOLED)
            if pooled is not None and name != POOLED:
                run["vs_pooled"] = paired_bootstrap(pooled["per_query"], run["per_query"], groups)
                run["gain_vs_pooled"] = run["ndcg@10"] - pooled["ndcg@10"]
            small = entry["runs"].get(SMALL_TO_BIG)
            if small is not None and name.startswith("mv-"):
                run["vs_small_to_big"] = paired_bootstrap(small["per_query"], run["per_query"], groups)
                run["gain_vs_small_to_big"] = run["ndcg@10"] - small["ndcg@10"]
    verdicts: dict[str, Any] = {}
    names = ["default", "default-plain", *CANDIDATES]
    scifact = results.get("scifact", {}).get("runs", {})
    for name in names:
        checks, ndcgs = [], []
        for dataset in RULE_DATASETS:
            for pipeline in DEFAULT_PIPELINES:
                run = results.get(f"{dataset}/{pipeline}", {}).get("runs", {}).get(name)
                if run is None or "psi_cut" not in run:
                    checks.append(None)
                    continue
                checks.append(run["psi_cut"] >= PSI_CUT and run["ndcg_gain"] >= NDCG_GAIN)
                ndcgs.append(run["ndcg@10"])
        sci = scifact.get(name, {}).get("ndcg@10")
        base = scifact.get(results.get("scifact", {}).get("truncation", "truncate"), {}).get("ndcg@10")
        sci_ok = None if sci is None or base is None else sci >= base - SCIFACT_TOLERANCE
        verdicts[name] = {
            "position_checks": checks,
            "scifact_ok": sci_ok,
            "meets_rule": all(c is True for c in checks) and sci_ok is True,
            "mean_ndcg": float(np.mean(ndcgs)) if ndcgs else None,
        }
    qualifying = [n for n in CANDIDATES if verdicts[n]["meets_rule"]]
    chosen = max(qualifying, key=lambda n: verdicts[n]["mean_ndcg"]) if qualifying else None
    return {"verdicts": verdicts, "chosen": chosen, "multivector": multivector_verdicts(results)}


def multivector_verdicts(results: dict[str, Any]) -> dict[str, Any]:
    """The multi-vector rule (docs/multivector_study.md) for every multi-vector run, and the aggregate it picks.

    Per (position set, default pipeline): nDCG@10 ≥ pooled + MV_GAIN, ≥ the stack's small-to-big, PSI ≤ pooled's;
    SciFact ≥ pooled − SCIFACT_TOLERANCE. The aggregate: the highest mean nDCG@10 over the four runs among the
    aggregates meeting it (rounded to three decimals; a tie goes to the earlier of AGGREGATE_CHOICES, "max" first);
    if none meets it, the same among those meeting the PSI and SciFact parts.
    """
    scifact = results.get("scifact", {}).get("runs", {})
    verdicts: dict[str, Any] = {}
    for name in (*MULTIVECTOR, *MULTIVECTOR_CALIBRATED):
        parts: dict[str, Any] = {}
        ndcgs = []
        for dataset in RULE_DATASETS:
            for pipeline in DEFAULT_PIPELINES:
                runs = results.get(f"{dataset}/{pipeline}", {}).get("runs", {})
                run, pooled, small = runs.get(name), runs.get(POOLED), runs.get(SMALL_TO_BIG)
                if run is None or pooled is None:
                    parts[f"{dataset}/{pipeline}"] = None
                    continue
                ndcgs.append(run["ndcg@10"])
                parts[f"{dataset}/{pipeline}"] = {
                    "gain": run["ndcg@10"] >= pooled["ndcg@10"] + MV_GAIN,
                    "small_to_big": None if small is None else run["ndcg@10"] >= small["ndcg@10"],
                    "psi": run["psi"] <= pooled["psi"],
                }
        pooled_name = "pooled-calibrated" if name in MULTIVECTOR_CALIBRATED else POOLED
        sci, base = scifact.get(name, {}).get("ndcg@10"), scifact.get(POOLED, {}).get("ndcg@10")
        sci_ok = None if sci is None or base is None else sci >= base - SCIFACT_TOLERANCE
        complete = all(v is not None and None not in v.values() for v in parts.values())
        verdicts[name] = {
            "runs": parts,
            "scifact_ok": sci_ok,
            "scifact_vs": POOLED,
            "scifact_pooled_same_embedder": pooled_name,
            "meets_rule": complete and all(all(v.values()) for v in parts.values()) and sci_ok is True,
            "meets_psi_and_scifact": complete and all(v["psi"] for v in parts.values()) and sci_ok is True,
            "mean_ndcg": float(np.mean(ndcgs)) if ndcgs else None,
        }

    def pick(names: list[str]) -> str | None:
        if not names:
            return None
        return max(names, key=lambda n: (round(verdicts[n]["mean_ndcg"], 3), -TIE_ORDER.index(n.removeprefix("mv-"))))

    meeting = [n for n in MULTIVECTOR if verdicts[n]["meets_rule"]]
    fallback = [n for n in MULTIVECTOR if verdicts[n]["meets_psi_and_scifact"]]
    chosen = pick(meeting) or pick(fallback)
    return {
        "verdicts": verdicts,
        "rule_holds": bool(meeting),
        "aggregate": None if chosen is None else chosen.removeprefix("mv-"),
        "aggregate_by": "rule" if meeting else ("psi and scifact parts" if fallback else None),
    }


def markdown(results: dict[str, Any], report: dict[str, Any]) -> str:
    lines = [
        "| data / pipeline | embedder | nDCG@10 [Δ vs anchor, 95 % CI] | R@10 | nDCG@10 begin / mid / end of chunk |"
        " PSI (change vs anchor) | doc thirds | never embedded | calibrated | chunks/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, entry in results.items():
        if key == "scifact":
            continue
        for name, run in entry["runs"].items():
            label = LABELS.get(key.split("/")[1].replace("-fair-splitter", ""), ANCHOR) if name == ANCHOR else name
            delta = ""
            if "vs_anchor" in run:
                lo, hi = run["vs_anchor"]["ndcg_delta_ci"]
                delta = f" [{run['ndcg_gain']:+.3f}, {lo:+.3f}…{hi:+.3f}]"
            cut = f" ({-run['psi_cut']:+.0%})" if "psi_cut" in run else ""
            thirds = " / ".join("–" if v is None else f"{v:.3f}" for v in run["chunk_third"])
            doc = " / ".join("–" if v is None else f"{v:.3f}" for v in run["document_third"])
            lines.append(
                f"| {key} ({entry['chunks']} chunks, {entry['questions']} q) | {label} | {run['ndcg@10']:.3f}{delta} |"
                f" {run['recall@10']:.3f} | {thirds} | {run['psi']:.2f}{cut} | {doc} |"
                f" {_share(run['tokens_never_embedded'])} | {_share(run['chunks_calibrated'])} |"
                f" {run['chunks_per_s']:.1f} |"
            )
    if "scifact" in results:
        runs = results["scifact"]["runs"]
        base = runs.get(results["scifact"].get("truncation", "truncate"), {}).get("ndcg@10")
        lines += ["", "| SciFact | nDCG@10 | Δ vs truncate |", "|---|---|---|"]
        for name, run in runs.items():
            diff = "" if base is None else f"{run['ndcg@10'] - base:+.4f}"
            lines.append(f"| {name} | {run['ndcg@10']:.4f} | {diff} |")
    lines += ["", f"Rule: {report['chosen'] or 'no candidate meets it'}"]
    for name, verdict in report["verdicts"].items():
        lines.append(f"- {name}: {verdict}")
    return "\n".join(lines) + "\n"


def readme_table(results: dict[str, Any]) -> str:
    """The README's first-screen table: each default pipeline, the anchor next to ours with its defaults."""
    lines = [
        "| documents → pipeline | embedder | nDCG@10 | Δ [95 % CI] | end-of-chunk nDCG@10 | PSI | tokens never embedded"
        " |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, entry in results.items():
        dataset, _, pipeline = key.partition("/")
        if key == "scifact" or pipeline not in DEFAULT_PIPELINES or not {"default", ANCHOR} <= set(entry["runs"]):
            continue
        where = f"{dataset} ({entry['documents']} documents, {entry['questions']} questions) → {pipeline}"
        for name, label in (
            (ANCHOR, LABELS[pipeline]),
            ("default", "FairEmbedding" if pipeline == "llamaindex" else "FairEmbeddings"),
        ):
            run = entry["runs"][name]
            delta = ""
            if "vs_anchor" in run:
                lo, hi = run["vs_anchor"]["ndcg_delta_ci"]
                delta = f"{run['ndcg_gain']:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            end = run["chunk_third"][2]
            psi = f"{run['psi']:.2f}" + (f" ({-run['psi_cut']:+.0%})" if "psi_cut" in run else "")
            lines.append(
                f"| {where if name == ANCHOR else ''} | {label} | {run['ndcg@10']:.3f} | {delta} |"
                f" {'–' if end is None else f'{end:.3f}'} | {psi} | {_share(run['tokens_never_embedded'])} |"
            )
    return "\n".join(lines) + "\n"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _ci(run: dict[str, Any], versus: str = "vs_pooled", gain: str = "gain_vs_pooled") -> str:
    if versus not in run:
        return ""
    lo, hi = run[versus]["ndcg_delta_ci"]
    return f"{run[gain]:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _row_label(name: str, pipeline: str) -> str:
    if name == ANCHOR:
        return LABELS[pipeline]
    if name == SMALL_TO_BIG:
        return SMALL_TO_BIG_LABELS[pipeline]
    if name == POOLED:
        return f"{OURS[pipeline]} (pooled, default)"
    if name == POOLED_STORE:
        return f"{OURS[pipeline]} pooled in {'FaissVectorStore' if pipeline == 'langchain' else 'FairFaissVectorStore'}"
    calibrated = name in MULTIVECTOR_CALIBRATED
    aggregate = name.removeprefix("mv-").removeprefix("calibrated-")
    return f"multivector=True, aggregate={aggregate!r}" + (", calibrated windows" if calibrated else "")


def multivector_table(results: dict[str, Any]) -> str:
    """The multi-vector study: every row of the default pipelines with Δ vs pooled, distinct results, costs."""
    lines = [
        "| data → pipeline | run | nDCG@10 | Δ vs pooled [95 % CI] | Δ vs small-to-big [95 % CI] |"
        " begin / mid / end of chunk | PSI | distinct of 10 | build s | index MB | p50 / p95 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, entry in results.items():
        dataset, _, pipeline = key.partition("/")
        if key == "scifact" or pipeline not in DEFAULT_PIPELINES:
            continue
        where = f"{dataset} ({entry['documents']} docs, {entry['chunks']} chunks, {entry['questions']} q) → {pipeline}"
        first = True
        for name in (ANCHOR, SMALL_TO_BIG, POOLED, POOLED_STORE, *MULTIVECTOR, *MULTIVECTOR_CALIBRATED):
            run = entry["runs"].get(name)
            if run is None or (name == POOLED_STORE and run.get("same_as") == POOLED):
                continue
            thirds = " / ".join("–" if v is None else f"{v:.3f}" for v in run["chunk_third"])
            build = (
                ""
                if "build_s" not in run
                else f"{run['build_s']:.1f}" + (" (reused)" if run.get("embedding_reused") else "")
            )
            size = "" if run.get("index_bytes") is None else f"{run['index_bytes'] / 1e6:.2f}"
            latency = (
                "" if "latency_ms_p50" not in run else f"{run['latency_ms_p50']:.2f} / {run['latency_ms_p95']:.2f}"
            )
            lines.append(
                f"| {where if first else ''} | {_row_label(name, pipeline)} | {run['ndcg@10']:.3f} | {_ci(run)} |"
                f" {_ci(run, 'vs_small_to_big', 'gain_vs_small_to_big')} |"
                f" {thirds} | {run['psi']:.2f} | {run.get('distinct', 10.0):.2f} | {build} | {size} | {latency} |"
            )
            first = False
    scifact = results.get("scifact", {}).get("runs", {})
    if POOLED in scifact:
        base = scifact[POOLED]
        lines += ["", "| SciFact (300 claims, 5,183 abstracts) | nDCG@10 | Δ vs pooled [95 % CI] |", "|---|---|---|"]
        for name in (POOLED, *MULTIVECTOR, "pooled-calibrated", *MULTIVECTOR_CALIBRATED):
            run = scifact.get(name)
            if run is None:
                continue
            delta = ""
            if name != POOLED:
                lo, hi = paired_bootstrap(base["per_query"], run["per_query"], {})["ndcg_delta_ci"]
                delta = f"{run['ndcg@10'] - base['ndcg@10']:+.4f} [{lo:+.4f}, {hi:+.4f}]"
            lines.append(f"| {name} | {run['ndcg@10']:.4f} | {delta} |")
    return "\n".join(lines) + "\n"


def multivector_rule_table(results: dict[str, Any], report: dict[str, Any]) -> str:
    """The rule's table: each multi-vector run on the four rule runs (vs pooled and small-to-big), SciFact, verdict."""
    keys = [f"{d}/{p}" for d in RULE_DATASETS for p in DEFAULT_PIPELINES]
    lines = [
        "| run | " + " | ".join(f"{k} nDCG@10 (PSI)" for k in keys) + " | mean | SciFact Δ vs pooled | rule |",
        "|---" * (len(keys) + 4) + "|",
    ]
    mv = report["multivector"]
    scifact = results.get("scifact", {}).get("runs", {})
    base = scifact.get(POOLED, {}).get("ndcg@10")
    for name in (ANCHOR, SMALL_TO_BIG, POOLED, *MULTIVECTOR, *MULTIVECTOR_CALIBRATED):
        cells, ndcgs = [], []
        for key in keys:
            run = results.get(key, {}).get("runs", {}).get(name)
            cells.append("–" if run is None else f"{run['ndcg@10']:.3f} ({run['psi']:.2f})")
            if run is not None:
                ndcgs.append(run["ndcg@10"])
        sci = scifact.get(name, {}).get("ndcg@10")
        sci_cell = "–" if sci is None or base is None or name == POOLED else f"{sci - base:+.4f}"
        verdict = mv["verdicts"].get(name)
        rule = "–"
        if verdict is not None:
            failed = [
                f"{k}: {part}"
                for k, parts in verdict["runs"].items()
                if parts
                for part, ok in parts.items()
                if ok is False
            ]
            if verdict["scifact_ok"] is False:
                failed.append("scifact")
            rule = "meets" if verdict["meets_rule"] else "fails " + ", ".join(failed) if failed else "incomplete"
            missing = [k for k, parts in verdict["runs"].items() if parts is None or None in parts.values()]
            if missing or verdict["scifact_ok"] is None:
                rule += (
                    " (not measured: "
                    + ", ".join(missing + (["scifact"] if verdict["scifact_ok"] is None else []))
                    + ")"
                )
            if name.removeprefix("mv-") == mv["aggregate"]:
                rule += " — chosen aggregate"
        mean = f"{np.mean(ndcgs):.3f}" if len(ndcgs) == len(keys) else "–"
        label = {ANCHOR: "anchor", SMALL_TO_BIG: "small-to-big (stack's own)", POOLED: "pooled (default)"}.get(
            name, name
        )
        lines.append(f"| {label} | {' | '.join(cells)} | {mean} | {sci_cell} | {rule} |")
    lines.append("")
    lines.append(f"Rule holds: {mv['rule_holds']}; aggregate: {mv['aggregate']} (by {mv['aggregate_by']}).")
    return "\n".join(lines) + "\n"


def readme_multivector_table(results: dict[str, Any], aggregate: str | None) -> str:
    """The README's first-screen block: per default pipeline the anchor, small-to-big, pooled and multi-vector."""
    name = f"mv-{aggregate or 'max'}"
    lines = [
        "| documents → pipeline | run | nDCG@10 | Δ vs pooled [95 % CI] | end-of-chunk nDCG@10 | PSI | results of 10 |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, entry in results.items():
        dataset, _, pipeline = key.partition("/")
        if key == "scifact" or pipeline not in DEFAULT_PIPELINES or dataset not in RULE_DATASETS:
            continue
        where = f"{dataset} ({entry['documents']} documents, {entry['questions']} questions) → {pipeline}"
        first = True
        for row in (ANCHOR, SMALL_TO_BIG, POOLED, name):
            run = entry["runs"].get(row)
            if run is None:
                continue
            end = run["chunk_third"][2]
            lines.append(
                f"| {where if first else ''} | {_row_label(row, pipeline)} | {run['ndcg@10']:.3f} | {_ci(run)} |"
                f" {'–' if end is None else f'{end:.3f}'} | {run['psi']:.2f} | {run.get('distinct', 10.0):.1f} |"
            )
            first = False
    return "\n".join(lines) + "\n"


def candidate_table(results: dict[str, Any], report: dict[str, Any]) -> str:
    """The rule's table: every candidate policy on each (rule dataset, default pipeline), SciFact, the verdict."""
    keys = [f"{d}/{p}" for d in RULE_DATASETS for p in DEFAULT_PIPELINES]
    head = " | ".join(f"{k} nDCG@10 (PSI vs anchor)" for k in keys)
    lines = [f"| policy | {head} | SciFact Δ vs truncate | rule |", "|---" * (len(keys) + 3) + "|"]
    scifact = results.get("scifact", {}).get("runs", {})
    base = scifact.get(results.get("scifact", {}).get("truncation", "truncate"), {}).get("ndcg@10")
    for name in [ANCHOR, *CANDIDATES]:
        cells = []
        for key in keys:
            run = results.get(key, {}).get("runs", {}).get(name)
            if run is None:
                cells.append("–")
            else:
                cut = f" ({-run['psi_cut']:+.0%})" if "psi_cut" in run else f" (PSI {run['psi']:.2f})"
                cells.append(f"{run['ndcg@10']:.3f}{cut}")
        sci = scifact.get(name, {}).get("ndcg@10")
        sci_cell = "–" if sci is None or base is None else f"{sci - base:+.4f}"
        verdict = report["verdicts"].get(name, {})
        rule = "chosen" if name == report["chosen"] else ("meets" if verdict.get("meets_rule") else "–")
        label = "anchor (HuggingFaceEmbedding/-s)" if name == ANCHOR else name
        lines.append(f"| {label} | {' | '.join(cells)} | {sci_cell} | {rule} |")
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    """nDCG@10 by where the answer sits in its chunk, anchor vs ours, for the two default pipelines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in results if k != "scifact" and k.split("/")[1] in DEFAULT_PIPELINES]
    if not keys:
        return
    fig, axes = plt.subplots(1, len(keys), figsize=(3.2 * len(keys), 3.2), sharey=True, squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        for name, style in ((ANCHOR, "o--"), ("default", "s-")):
            run = results[key]["runs"].get(name)
            if run is None:
                continue
            label = LABELS[key.split("/")[1]] if name == ANCHOR else "Fair (default)"
            ax.plot(["begin", "middle", "end"], [v or 0 for v in run["chunk_third"]], style, label=label)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("answer in its chunk")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("nDCG@10")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
