"""Where `FairFaissVectorStore` went: llama-index-vector-stores-fair, imported as `llama_index.vector_stores.fair`.

LlamaIndex keeps embeddings under `llama_index.embeddings` and vector stores under `llama_index.vector_stores`, one
distribution each, so the store moved out of this package into its own distribution. The old imports
(`from llama_index.embeddings.fair import FairFaissVectorStore`, `llama_index.embeddings.fair.vector_store`) keep
working through the helpers here: with the new distribution installed they give its objects and a
DeprecationWarning naming the new import; without it, an ImportError that says what to install. Nothing here imports
the store package itself, so this package does not depend on it.
"""

from __future__ import annotations

import warnings

__all__ = ["NEW_DISTRIBUTION", "NEW_IMPORT", "NEW_PACKAGE", "raise_if_store_missing", "warn_moved"]

NEW_PACKAGE = "llama_index.vector_stores.fair"
NEW_DISTRIBUTION = "llama-index-vector-stores-fair"
NEW_IMPORT = f"from {NEW_PACKAGE} import FairFaissVectorStore"
_CHECKOUT_FOLDER = "./integrations/llamaindex-vector-stores"  # the distribution's folder in fair-retrieval's repository


def warn_moved(old: str, *, stacklevel: int = 2) -> None:
    """Warn (DeprecationWarning) that `old` (an import path of this package) moved, naming the new import.

    Args:
        old: what the caller imported, e.g. "llama_index.embeddings.fair.FairFaissVectorStore".
        stacklevel: as in `warnings.warn`, counted from the caller of this function (2: the caller's caller,
            the user's import line; import machinery frames are skipped by `warnings` itself).
    """
    warnings.warn(
        f"{old} moved to the {NEW_DISTRIBUTION} distribution: import it with `{NEW_IMPORT}` (and BEST_WINDOW_KEY, "
        f"SUPPORTED_OPERATORS from {NEW_PACKAGE} likewise). The old import will be removed in a future release.",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def raise_if_store_missing(error: ModuleNotFoundError) -> None:
    """Raise an ImportError saying what to install when `error` is the store package missing; else return.

    Only a missing `llama_index.vector_stores.fair` (or the namespace above it) is translated, so that another
    missing module (a dependency of the installed store) is reported as itself by the caller's `raise`.

    Raises:
        ImportError: llama-index-vector-stores-fair is not installed.
    """
    missing = error.name or ""
    if missing and (missing == NEW_PACKAGE or NEW_PACKAGE.startswith(f"{missing}.")):
        raise ImportError(
            f"FairFaissVectorStore moved out of llama-index-embeddings-fair into its own distribution, "
            f"{NEW_DISTRIBUTION}, which is not installed: pip install {NEW_DISTRIBUTION} (in a checkout of "
            f"fair-retrieval: pip install {_CHECKOUT_FOLDER}), then import it with `{NEW_IMPORT}`."
        ) from error
