"""Build throughput of the stores on the same chunks, in one run: our default store (window vectors, one model pass
per window size), our pooled store (`multivector=False`, one vector a chunk), and the stack's own small-to-big (one
window a child, embedded by the plain HuggingFace embedding), through each stack as a user builds them.

Chunks: the first SQuAD-v2 dev articles through the stack's default splitter (as benchmarks/hybrid.py makes them).
Each store is built `--rounds` times, the stores alternating within a round (the order rotated every round) so
that a busy machine slows them alike; every embedding object is made and its model loaded (one query embedded)
before its build is timed. Reported: chunks a second (median over rounds) and each store's build time as a ratio to
the pooled store's in the same round (median, min–max). One torch and faiss thread.

    python benchmarks/store_build_speed.py [--model FOLDER] [--squad-articles 2] [--rounds 3] [--json out.json]

`--shapes` (names of benchmarks/dense_windows.py's shapes, or "budget" for every shape of its budget round) builds
our default store once more for each window shape (`windows=StoreWindows(sizes, "text")`, the sizes in the model's
tokens); shapes whose sizes are the same tokens on this model are one store, reported under each name.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from typing import Any

import dense_windows
import hybrid
import pipelines_runs
from pipelines_data import Chunk

from fair_retrieval.stores import StoreWindows

logger = logging.getLogger("store_build_speed")

STORES = ("pooled", "default", "small-to-big")


def warmed(stack: str, name: str, model: str) -> Any:
    """The stack's embedding object for `name`, its model loaded."""
    embedding = pipelines_runs.make_embedding(stack, name, model)
    pipelines_runs.query_vector_fn(stack, embedding)("warm up")
    return embedding


def shape_stores(names: list[str], content: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each shape name -> the store it is built as ("shape:" and its sizes in tokens, largest first) and those
    sizes: shapes of the same tokens on this model (e.g. MiniLM's `t128+t256` and `whole+t128`) are one store."""
    stores: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name in names:
        if name not in dense_windows.BUDGET_CANDIDATES:
            raise SystemExit(f"unknown shape {name!r}; choose from {sorted(dense_windows.BUDGET_CANDIDATES)}")
        sizes = {dense_windows.size_tokens(size, content) for size in dense_windows.BUDGET_CANDIDATES[name]}
        tokens = tuple(sorted(sizes, reverse=True))
        stores[name] = ("shape:" + "+".join(map(str, tokens)), tokens)
    return stores


def build(
    stack: str, store: str, model: str, chunks: list[Chunk], reference: Any, shapes: dict[str, tuple[int, ...]]
) -> float:
    """Seconds to build one store over `chunks` (model loading excluded): ours through `hybrid.default_store` (a
    shape's with its windows), the stack's one-window small-to-big through `pipelines_runs.build_small_to_big` (the
    anchor embedding)."""
    if store == "small-to-big":
        anchor = warmed(stack, pipelines_runs.ANCHOR, model)
        return pipelines_runs.build_small_to_big(stack, anchor, chunks, reference)[1]
    options: dict[str, Any] = {"multivector": False} if store == "pooled" else {}
    if store in shapes:
        options["windows"] = StoreWindows(shapes[store], "text")
    return hybrid.default_store(stack, model, chunks, embedding=warmed(stack, "default", model), **options)[1]


def measure(
    stack: str, model: str, chunks: list[Chunk], reference: Any, rounds: int, shapes: dict[str, tuple[int, ...]]
) -> dict[str, Any]:
    """Each store's build seconds per round (alternating, the order rotated), chunks/s and ratios to pooled."""
    stores = (*STORES, *shapes)
    seconds: dict[str, list[float]] = {store: [] for store in stores}
    for round_ in range(rounds):
        order = stores[round_ % len(stores) :] + stores[: round_ % len(stores)]
        for store in order:
            seconds[store].append(build(stack, store, model, chunks, reference, shapes))
            logger.info("%s round %d: %s %.1f s", stack, round_ + 1, store, seconds[store][-1])
    result: dict[str, Any] = {"chunks": len(chunks), "seconds": seconds, "stores": {}}
    for store in stores:
        ratios = [s / p for s, p in zip(seconds[store], seconds["pooled"], strict=True)]
        result["stores"][store] = {
            "chunks_per_s": len(chunks) / statistics.median(seconds[store]),
            "vs_pooled": statistics.median(ratios),
            "vs_pooled_range": [min(ratios), max(ratios)],
        }
    return result


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "| model | stack (chunks) | store | chunks/s | build time vs pooled (median, min–max) |",
        "|---|---|---|---|---|",
    ]
    for key, result in results["runs"].items():
        for store, row in result["stores"].items():
            low, high = row["vs_pooled_range"]
            lines.append(
                f"| {results['model']} | {key} ({result['chunks']}) | {store} | {row['chunks_per_s']:.2f} | "
                f"{row['vs_pooled']:.2f}× ({low:.2f}–{high:.2f}) |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--stacks", default="langchain,llamaindex")
    parser.add_argument("--squad-articles", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument(
        "--shapes",
        default="",
        help='window shapes of our default store to build too (comma-separated dense_windows shape names; "budget": '
        "every shape of its budget round)",
    )
    args = parser.parse_args(argv)
    study = hybrid.parse_args(["--squad-articles", str(args.squad_articles), "--out", "unused"])
    study.model = args.model
    _, reference = hybrid.prepared(study)
    names = [n for n in args.shapes.split(",") if n]
    names = list(dense_windows.BUDGET_CANDIDATES) if names == ["budget"] else names
    # the window the stores' embedder reads (dense_windows cuts its sizes from the same one)
    content = pipelines_runs.make_embedding("llamaindex", "default", study.model).embedder.window_content_tokens
    named = shape_stores(names, content)
    shapes = dict(named.values())  # store name -> sizes, each built once
    results: dict[str, Any] = {
        "model": hybrid.model_name(study.model),
        "runs": {},
        "shapes": {name: store for name, (store, _) in named.items()},
    }
    for stack in args.stacks.split(","):
        chunks, _, _, _ = hybrid.set_chunks("squad-v2", stack, study.model, reference, study)
        results["runs"][stack] = measure(stack, study.model, chunks, reference, args.rounds, shapes)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
