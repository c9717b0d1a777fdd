"""Ray itself: the lazy import with a helpful error, connecting to a cluster or starting a local one, and turning
Ray's wrapped worker failures into readable errors.

Nothing here knows about embeddings; the other modules of `fair_retrieval.distributed` call `import_ray` instead of
`import ray`, so that `import fair_retrieval` works without the optional `ray` extra.
"""

from __future__ import annotations

import logging
import re
from typing import Any

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'fair-retrieval[ray]'"
_ERROR_LINE = re.compile(r"^\s*(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$")
_RAY_WRAPPERS = ("RayTaskError", "UserCodeException", "ActorDiedError", "RayActorError", "SystemException")


class DistributedJobError(RuntimeError):
    """A Ray job failed inside its workers (model loading or embedding); the message names the original error."""


def import_ray() -> Any:
    """Import `ray` with Ray Data, or raise an ImportError that says which extra to install."""
    try:
        import ray
        import ray.data
    except ImportError as error:
        raise ImportError(
            f"fair_retrieval.distributed needs Ray Data and pyarrow: {INSTALL_HINT} (or pip install 'ray[data]')."
        ) from error
    return ray


def import_pyarrow() -> Any:
    """Import `pyarrow` (a dependency of Ray Data), or raise an ImportError with the install command."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as error:
        raise ImportError(f"Reading and writing embedding shards needs pyarrow: {INSTALL_HINT}.") from error
    return pyarrow


def ensure_ray() -> Any:
    """Return the `ray` module, connected: an existing connection is reused, otherwise `ray.init()` is called.

    `ray.init()` joins the cluster named by the RAY_ADDRESS environment variable when it is set and starts a local
    Ray on this machine otherwise, so the same code runs on a laptop and on a cluster.
    """
    ray = import_ray()
    if not ray.is_initialized():
        ray.init()
        resources = ray.cluster_resources()
        logger.info("Ray connected: %s CPUs, %s GPUs in the cluster.", resources.get("CPU", 0), resources.get("GPU", 0))
    return ray


def check_capacity(ray: Any, actors: int, cpus_per_actor: float, gpus_per_actor: float) -> None:
    """Refuse an actor pool that cannot run on a single-node Ray (warn on a cluster, which may autoscale).

    The actors hold their CPUs for the whole job, and Ray Data's read and repartition tasks need one more CPU to feed
    them; an actor pool that takes every CPU therefore waits forever.

    Raises:
        ValueError: on a single-node Ray with too few CPUs or no GPU for the requested actors.
    """
    resources = ray.cluster_resources()
    cpus, gpus = float(resources.get("CPU", 0)), float(resources.get("GPU", 0))
    problems = []
    if actors * cpus_per_actor > cpus - 1:
        problems.append(
            f"{actors} worker(s) × {cpus_per_actor:g} CPU leave no CPU for Ray Data's read tasks on a Ray with "
            f"{cpus:g} CPUs (the job would wait forever); use fewer workers or a smaller cpus_per_worker "
            f"(e.g. {max(0.25, (cpus - 1) / max(actors, 1)):g})"
        )
    if gpus_per_actor > 0 and actors * gpus_per_actor > gpus:
        problems.append(
            f"{actors} worker(s) × {gpus_per_actor:g} GPU need more GPUs than this Ray has ({gpus:g}); use fewer "
            "workers, a fraction of a GPU per worker, or gpus_per_worker=0 for CPU workers"
        )
    if not problems:
        return
    message = "; ".join(problems) + "."
    if len(ray.nodes()) > 1:
        logger.warning("%s Continuing because this Ray cluster may add nodes.", message)
        return
    raise ValueError(message[0].upper() + message[1:])


def worker_failure(error: BaseException, what: str) -> DistributedJobError:
    """A `DistributedJobError` for a Ray failure, quoting the original exception that Ray wrapped.

    Ray reports a worker's exception as a RayTaskError/UserCodeException whose only trace of the original is the
    formatted traceback text; the last "SomethingError: message" line of it is what the user needs to read.
    """
    original = _original_error_line(str(error))
    detail = original or f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error) else ''}"
    return DistributedJobError(f"{what} failed in a Ray worker: {detail} (the worker logs above have the traceback).")


def is_ray_error(error: BaseException) -> bool:
    """Whether `error` is one of Ray's wrappers around a failure that happened in a worker."""
    ray = import_ray()
    names = {cls.__name__ for cls in type(error).__mro__}
    return isinstance(error, ray.exceptions.RayError) or bool(names.intersection(_RAY_WRAPPERS))


def _original_error_line(text: str) -> str | None:
    """The last line of a formatted traceback that names a non-Ray exception and its message."""
    found = None
    for line in text.splitlines():
        match = _ERROR_LINE.match(line)
        if match and not any(wrapper in match.group(1) for wrapper in _RAY_WRAPPERS):
            found = f"{match.group(1)}: {match.group(2).strip()}"
    return found
