"""EmbedderSpec: everything a Ray worker needs to build the same `FairEmbedder` as the driver would.

A worker cannot receive a loaded model cheaply (it would be pickled into every task), so the driver sends this small
recipe instead and each worker builds the embedder once. The recipe is also the fingerprint of a shard folder: a
resumed job must embed with exactly the settings that made the shards already written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fair_retrieval.calibration import Calibration
from fair_retrieval.positional import PositionalScaling

if TYPE_CHECKING:
    from fair_retrieval.embedder import FairEmbedder

_POOLINGS = ("cls", "mean", "last")
_PRECISIONS = ("auto", "float32", "float16", "bfloat16")


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
    """

    model: str
    calibration: Calibration | None = Calibration()  # noqa: RUF009 - frozen, so sharing it is safe
    pooling: Literal["cls", "mean", "last"] | None = None
    max_length: int | None = None
    batch_size: int = 32
    precision: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    positional_scaling: PositionalScaling | None = None
    device: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str | os.PathLike) or not str(self.model):
            raise TypeError(
                f"model must be a Hub id or a folder path (a str) that the Ray workers can load, got "
                f"{type(self.model).__name__}; a loaded SentenceTransformer cannot be shipped to workers."
            )
        model = Path(str(self.model)).expanduser()
        object.__setattr__(self, "model", str(model.resolve()) if model.exists() else str(self.model))
        if self.calibration is not None and not isinstance(self.calibration, Calibration):
            raise TypeError(f"calibration must be a Calibration or None, got {type(self.calibration).__name__}.")
        if self.pooling is not None and self.pooling not in _POOLINGS:
            raise ValueError(f"pooling must be one of {_POOLINGS} or None, got {self.pooling!r}.")
        if self.max_length is not None and (
            isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 1
        ):
            raise ValueError(f"max_length must be a positive int or None, got {self.max_length!r}.")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}.")
        if self.precision not in _PRECISIONS:
            raise ValueError(f"precision must be one of {_PRECISIONS}, got {self.precision!r}.")
        if self.positional_scaling is not None and not isinstance(self.positional_scaling, PositionalScaling):
            raise TypeError(
                f"positional_scaling must be a PositionalScaling or None, got {type(self.positional_scaling).__name__}."
            )

    def build(self, has_gpu: bool = False) -> FairEmbedder:
        """Load the embedder (on a worker). Without an explicit `device`, a worker given a GPU uses "cuda"."""
        from fair_retrieval.embedder import FairEmbedder

        device = self.device or ("cuda" if has_gpu else "cpu")
        return FairEmbedder(
            self.model,
            calibration=self.calibration,
            pooling=self.pooling,
            max_length=self.max_length,
            batch_size=self.batch_size,
            device=device,
            precision=self.precision,
            positional_scaling=self.positional_scaling,
        )

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
        }
