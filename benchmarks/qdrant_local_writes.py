"""What adds, re-adds and deletes cost in a Qdrant store in local mode (`QdrantClient(":memory:")`, a Python scan
for every filter), as the collection grows: the writes reach points by id, so each should cost what it changes.

For each size, a pooled store of `--dim`-d random unit vectors (no model time) through `QdrantStore.of_texts`:
`add_s` adds every document, `readd_s` writes a tenth of them again, `delete_s` deletes half by id. With
`--baseline CHECKOUT`, the same measurement also runs on another checkout of this repository (e.g. a worktree of an
earlier commit), in a subprocess of the same run. Results: `OUT/results.json` and a table on stdout.

    python benchmarks/qdrant_local_writes.py --sizes 2000,8000 --baseline ../old-main --out runs/qdrant-writes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

COLUMNS = ("add_s", "readd_s", "delete_s")


def measure(size: int, dim: int) -> dict[str, float]:
    """One run at `size` documents (see the module docstring)."""
    from qdrant_client import QdrantClient

    from fair_retrieval.stores import QdrantStore

    store = QdrantStore.of_texts(client=QdrantClient(":memory:"), collection_name="c", multivector=False, dim=dim)
    vectors = np.random.default_rng(0).standard_normal((size, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    keys = [f"d{i}" for i in range(size)]
    start = time.perf_counter()
    store.add_document_vectors(list(zip([f"text {i}" for i in range(size)], vectors, strict=True)), None, keys)
    added = time.perf_counter() - start
    tenth = max(1, size // 10)
    start = time.perf_counter()
    store.add_document_vectors(
        list(zip([f"again {i}" for i in range(tenth)], vectors[:tenth], strict=True)), None, keys[:tenth]
    )
    readded = time.perf_counter() - start
    start = time.perf_counter()
    store.delete_ids(keys[: size // 2])
    deleted = time.perf_counter() - start
    if len(store) != size - size // 2:
        raise AssertionError(f"{len(store)} documents left, expected {size - size // 2}")
    return {"add_s": added, "readd_s": readded, "delete_s": deleted}


def baseline(size: int, args: argparse.Namespace) -> dict[str, float]:
    """`measure` on the checkout `args.baseline`, in a subprocess with its package first on the path."""
    checkout = args.baseline.resolve()
    path = os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])
    command = [sys.executable, __file__, "--one", str(size), "--dim", str(args.dim)]
    done = subprocess.run(
        command, check=True, cwd=checkout, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| run | documents | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for row in results:
        lines.append(f"| {row['run']} | {row['documents']:,} | " + " | ".join(f"{row[c]:.3f}" for c in COLUMNS) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,8000", help="comma-separated document counts")
    parser.add_argument("--dim", type=int, default=16, help="vector size")
    parser.add_argument("--baseline", type=Path, help="another checkout measured too (a subprocess)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the baseline's subprocess: one size, JSON out
    parser.add_argument("--out", type=Path, default=Path("runs/qdrant-local-writes"))
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.dim)))
        return 0
    sizes = [int(size) for size in args.sizes.split(",")]
    if any(size < 2 for size in sizes) or args.dim < 1:
        parser.error("sizes of at least 2 documents and a positive --dim")
    if args.baseline is not None and not (args.baseline / "fair_retrieval").is_dir():
        raise SystemExit(f"--baseline {args.baseline} is not a checkout of this repository (no fair_retrieval/).")
    results = []
    for size in sizes:
        results.append({"run": "this checkout", "documents": size, **measure(size, args.dim)})
        print(json.dumps(results[-1]), flush=True)
        if args.baseline is not None:
            results.append({"run": f"{args.baseline.name} (baseline)", "documents": size, **baseline(size, args)})
            print(json.dumps(results[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"sizes": sizes, "dim": args.dim, "results": results}, indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
