"""Experiment (tried and dropped): keep a document's first K content tokens out of the baskets, as isolated keys.

    python benchmarks/lead_tokens.py                  # K = 32 on top of λ=0.75, preserve, min_full_baskets=3
    python benchmarks/lead_tokens.py --lead 16 --datasets scifact

Why it was tried: calibration costs general retrieval (SciFact) most, and a SciFact abstract opens with its title,
which carries the topic; flattening attention over baskets takes weight away from it. The idea treats the leading K
content tokens (the title or first sentence) like special tokens under special_tokens="preserve": they keep their own
attention mass and are not part of any basket.

It is measured here without changing the engine: the embedder's per-pass special-token mask is widened to the first
K content tokens, which is exactly how special_tokens="preserve" makes keys isolated. Embeddings are cached under
--cache-dir with the lead count in their key. The result (docs/defaults.md, "Ideas against the general-retrieval
cost") did not justify a `Calibration` option: SciFact did not improve and the PSI cut fell.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedding.embedder import FairEmbedder as _Embedder
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.data.load import load_task
from fair_retrieval.evaluation.default_model import bundled_model
from fair_retrieval.evaluation.runner import Evaluator

BASE = dataclasses.replace(Calibration.paper(), strength=0.75, special_tokens="preserve", min_full_baskets=3)


@contextmanager
def leading_tokens_isolated(count: int) -> Iterator[None]:
    """Within the block, every calibrated pass also isolates the first `count` content tokens of each text."""
    original = _Embedder._request

    def request(self: _Embedder, calibration: Calibration, features: dict[str, Any]) -> Any:
        made = original(self, calibration, features)
        if made.special_mask is None:
            raise ValueError("The experiment needs special_tokens='preserve' (it widens the special-token mask).")
        special = made.special_mask.to(made.padding_mask.device)
        content = made.padding_mask & ~special  # (B, L)
        lead = content & (content.cumsum(dim=1) <= count)  # (B, L) the first `count` content tokens
        return dataclasses.replace(made, special_mask=special | lead)

    _Embedder._request = request  # type: ignore[method-assign]
    try:
        yield
    finally:
        _Embedder._request = original  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lead", type=int, default=32, help="leading content tokens kept out of the baskets")
    parser.add_argument("--calibration", default=BASE.to_json(), help="base Calibration JSON (special_tokens=preserve)")
    parser.add_argument("--datasets", default="squad-v2,xquad:en,scifact")
    parser.add_argument("--cache-dir", type=Path, default=Path(".fair_cache"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    calibration = Calibration.from_json(args.calibration)
    if calibration.special_tokens != "preserve":
        raise ValueError("--calibration must use special_tokens='preserve'.")
    embedder = FairEmbedder(bundled_model(), max_length=512)
    cache = EmbeddingCache(args.cache_dir)
    for dataset in args.datasets.split(","):
        evaluator = Evaluator(embedder, load_task(dataset, embedder.token_lengths, 512), cache=cache)
        plain = evaluator.run("plain", None)
        base = evaluator.run("base", calibration)
        with leading_tokens_isolated(args.lead):
            documents, _ = evaluator.document_embeddings(calibration, extra={"lead_tokens": args.lead})
        lead = evaluator.score(f"lead {args.lead}", documents, calibration)
        for result in (plain, base, lead):
            row = {"dataset": dataset, "run": result.label, "ndcg@10": round(result.overall["ndcg@10"], 4)}
            if result.psi is not None:
                row["psi"] = round(result.psi, 4)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
