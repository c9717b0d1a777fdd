"""Paired-bootstrap confidence intervals for comparing two runs on the same queries."""

from __future__ import annotations

import numpy as np


def paired_bootstrap(
    plain: dict[str, float], run: dict[str, float], groups: dict[str, list[str]], samples: int = 2000, seed: int = 0
) -> dict[str, list[float]]:
    """95 % paired-bootstrap intervals (queries resampled) of the nDCG@10 change and the relative PSI change.

    Args:
        plain: query id → nDCG@10 of the reference run (plain embeddings, or an anchor).
        run: query id → nDCG@10 of the run compared with it (the same queries).
        groups: position group → its query ids; PSI's interval needs at least two groups.
        samples: bootstrap resamples.
        seed: seed of the resampling.

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
