"""EmbedderSpec: everything a Ray worker needs to build the same `FairEmbedder` as the driver would.

A worker cannot receive a loaded model cheaply (it would be pickled into every task), so the driver sends this small
recipe instead and each worker builds the embedder once. The recipe is also the fingerprint of a shard folder: a
resumed job must embed with exactly the settings that made the shards already written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fair_retrieval.calibration import Calibration
from fair_retrieval.embedder_options import EmbedderOptions
from fair_retrieval.positional import PositionalScaling
from fair_retrieval.windows import LongDocuments

if TYPE_CHECKING:
    from fair_retrieval.embedder import FairEmbedder

_DEFAULTS = EmbedderOptions()  # the options' defaults are declared once, there


@dataclass(frozen=True)
class EmbedderSpec:
    """How to build the document embedder on each worker (arguments as for `FairEmbedder`).

    Args:
        model: a Hub id or a folder that every worker can read (on a cluster: a shared path, or a Hub id with the
            model in each node's cache). A local folder is recorded as an absolute path.
        calibration: the document calibration; None embeds plainly.
        pooling: "cls", "mean", "last" or None (the model's own).
        max_length: token limit per text; None uses the model's.
        batch_size: texts per forward pass on a worker.
        precision: "auto", "float32", "float16" or "bfloat16" (as for `FairEmbedder`).
        positional_scaling: LPES factors for documents, or None.
        device: "cpu", "cuda", …; None lets each worker choose: "cuda" when it was given a GPU, else "cpu".
        long_documents: "windows" or "truncate" (as for `FairEmbedder`; the default is `EmbedderOptions`').
        window_overlap: tokens consecutive windows share (as for `FairEmbedder`).
    """

    model: str
    calibration: Calibration | None = Calibration()  # noqa: RUF009 - frozen, so sharing it is safe
    pooling: Literal["cls", "mean", "last"] | None = None
    max_length: int | None = None
    batch_size: int = 32
    precision: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    positional_scaling: PositionalScaling | None = None
    device: str | None = None
    long_documents: LongDocuments = _DEFAULTS.long_documents
    window_overlap: int | None = _DEFAULTS.window_overlap

    @classmethod
    def from_options(cls, model: str, options: EmbedderOptions) -> EmbedderSpec:
        """The spec of `options` for `model`, so a caller that holds `EmbedderOptions` forwards every option.

        Raises:
            TypeError: for options a worker cannot receive: `model_kwargs`, or a `torch.device` (pass its name).
        """
        if options.model_kwargs is not None:
            raise TypeError("EmbedderSpec does not forward model_kwargs to Ray workers; leave them unset.")
        if options.device is not None and not isinstance(options.device, str):
            raise TypeError(f"device must be a str for Ray workers (e.g. 'cuda'), got {type(options.device).__name__}.")
        return cls(
            model,
            calibration=options.calibration,
            pooling=options.pooling,
            max_length=options.max_length,
            batch_size=options.batch_size,
            precision=options.precision,
            positional_scaling=options.positional_scaling,
            device=options.device,
            long_documents=options.long_documents,
            window_overlap=options.window_overlap,
        )

    def __post_init__(self) -> None:
        if not isinstance(self.model, str | os.PathLike) or not str(self.model):
            raise TypeError(
                f"model must be a Hub id or a folder path (a str) that the Ray workers can load, got "
                f"{type(self.model).__name__}; a loaded SentenceTransformer cannot be shipped to workers."
            )
        model = Path(str(self.model)).expanduser()
        object.__setattr__(self, "model", str(model.resolve()) if model.exists() else str(self.model))
        self.options()  # invalid settings fail here, on the driver, not on every worker

    def options(self) -> EmbedderOptions:
        """The `FairEmbedder` options this spec describes (device as given: None lets `build` choose)."""
        return EmbedderOptions(
            calibration=self.calibration,
            pooling=self.pooling,
            max_length=self.max_length,
            batch_size=self.batch_size,
            device=self.device,
            precision=self.precision,
            positional_scaling=self.positional_scaling,
            long_documents=self.long_documents,
            window_overlap=self.window_overlap,
        )

    def build(self, has_gpu: bool = False) -> FairEmbedder:
        """Load the embedder (on a worker). Without an explicit `device`, a worker given a GPU uses "cuda"."""
        device = self.device or ("cuda" if has_gpu else "cpu")
        return replace(self.options(), device=device).build(self.model)

    def fingerprint(self) -> dict[str, Any]:
        """The settings that determine the vectors (JSON-compatible); batch size and device do not, up to
        floating-point noise, so a job may resume on other hardware."""
        return {
            "model": self.model,
            "calibration": self.calibration.to_dict() if self.calibration is not None else None,
            "pooling": self.pooling,
            "max_length": self.max_length,
            "precision": self.precision,
            "positional_scaling": self.positional_scaling.to_dict() if self.positional_scaling is not None else None,
            "long_documents": self.long_documents,
            "window_overlap": self.window_overlap,
        }
