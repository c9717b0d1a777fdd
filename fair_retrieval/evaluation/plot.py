"""The PNG plot of a report: nDCG@10 by answer position, one line per run (plain vs calibrated).

Meant to be read at a glance: x is where the answer starts in its document (0 % = first token, 100 % = last),
y is nDCG@10 of the questions whose answer starts there; a flat line means no position bias. The thirds used for
PSI are shaded, and each line's legend entry gives its PSI and overall nDCG@10.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fair_retrieval.evaluation.evaluation_report import display_name
from fair_retrieval.evaluation.groups import Grouping, bin_centers
from fair_retrieval.evaluation.runner import PRIMARY

_STYLES: list[dict[str, Any]] = [
    {"color": "#7f7f7f", "marker": "o", "linestyle": "--"},
    {"color": "#1f77b4", "marker": "s", "linestyle": "-"},
    {"color": "#d62728", "marker": "^", "linestyle": "-"},
    {"color": "#2ca02c", "marker": "D", "linestyle": "-"},
]


def plot_by_position(report: dict[str, Any], path: str | Path) -> Path:
    """Write the nDCG@10-by-answer-position plot of `report` to `path` (PNG) and return the path.

    Raises:
        ValueError: if the report has no position bins (the task has no answer positions, e.g. SciFact).
        ImportError: without matplotlib (pip install 'fair-retrieval[eval]').
    """
    if not report.get("bins"):
        raise ValueError(
            f"Task {report['task']['name']!r} has no answer positions, so there is nothing to plot by position."
        )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("Plots need matplotlib: pip install 'fair-retrieval[eval]'.") from error

    bins: Grouping = {name: [] for name in report["bins"]}
    x = [100 * c for c in bin_centers(bins)]
    counts = list(report["bins"].values())
    fig, ax = plt.subplots(figsize=(8, 5.6), dpi=120)
    for start, shade in ((0, "#f2f2f2"), (100 / 3, "#ffffff"), (200 / 3, "#f2f2f2")):
        ax.axvspan(start, start + 100 / 3, color=shade, zorder=0)
    for name, label in zip(("begin", "middle", "end"), (16.7, 50.0, 83.3), strict=True):
        ax.text(
            label, 1.01, name, transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=9, color="#555555"
        )
    lowest, highest = 1.0, 0.0
    for index, run in enumerate(report["runs"]):
        y = [run["bins"][name][PRIMARY] for name in report["bins"]]
        lowest, highest = min(lowest, *y), max(highest, *y)
        psi = "n/a" if run["psi"] is None else f"{run['psi']:.3f}"
        if report["grouping"]["name"] != "thirds":
            psi += f" over {report['grouping']['name']} groups"
        ax.plot(
            x,
            y,
            linewidth=2.2,
            markersize=6,
            zorder=3,
            **_STYLES[index % len(_STYLES)],
            label=f"{run['label']}  (nDCG@10 {run['overall'][PRIMARY]:.3f}, PSI {psi})",
        )
    margin = max(0.05, (highest - lowest) * 0.25)
    ax.set_ylim(max(0.0, lowest - margin), min(1.0, highest + margin))
    ax.set_xlim(0, 100)
    ax.set_xlabel("where the answer starts in its document (% of the document's tokens)")
    ax.set_ylabel("nDCG@10")
    ax.grid(True, axis="y", alpha=0.35)
    for xi, n in zip(x, counts, strict=True):
        ax.text(
            xi,
            0.01,
            f"n={n}",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=7,
            color="#777777",
        )
    task, model = report["task"], report["model"]
    model_name = display_name(model["name"])
    ax.set_title(
        f"{task['name']} — {model_name}: retrieval quality by answer position\n"
        f"{task['num_queries']} questions, {task['num_documents']} documents · a flat line means no position bias",
        fontsize=11,
        pad=18,
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=9, frameon=False, ncol=1)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path
