"""The `fair-retrieval` command line.

Each subcommand lives in its own module `fair_retrieval/cli/cmd_<name>.py` exposing
`register(subparsers: argparse._SubParsersAction) -> None`, which adds a parser whose `func` default runs it
(`func(args) -> int`). Modules are discovered here, so adding a command never edits this file. Helpers that several
commands need live in `common.py` (runtime) and `options.py` (argparse); a command module never imports another.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence

# The conventional exit status of a program stopped by Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every discovered subcommand."""
    parser = argparse.ArgumentParser(
        prog="fair-retrieval",
        description="Position-fair dense retrieval: calibrated document embeddings, FAISS indices, evaluation.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    package = importlib.import_module(__name__)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            module.register(subparsers)
    return parser


def quiet_dependencies(verbose: int) -> None:
    """Keep what the dependencies say to the CLI's verbosity: bm25s logs each index build at DEBUG on a logger of
    its own level (its import sets DEBUG, so it is imported here first), shown only with -vv; transformers'
    weight-loading progress bar ("Loading weights") only with -v."""
    import bm25s  # noqa: F401  # it sets its logger to DEBUG when imported: first, so the level set here stays

    logging.getLogger("bm25s").setLevel(logging.DEBUG if verbose >= 2 else logging.WARNING)
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        return
    if verbose == 0:
        transformers_logging.disable_progress_bar()
    else:
        transformers_logging.enable_progress_bar()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `fair-retrieval` console script; returns the process exit code.

    Usage errors (ValueError, TypeError, FileNotFoundError) print one line and exit 2; Ctrl-C prints one line and
    exits 130 (commands write their outputs atomically, so stopping leaves nothing half-written).
    """
    command = "fair-retrieval"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        command = f"fair-retrieval {args.command}" if args.command else command
        level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
        quiet_dependencies(args.verbose)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"{command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
