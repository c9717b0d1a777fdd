"""clustered_vectors: random but clustered unit vectors, a stand-in for a document-embedding corpus.

Private: a fixture of the index tests and the recall benchmarks (benchmarks/index_recall.py, benchmarks/scale.py),
not part of the library's API.

Real embeddings are not uniform on the sphere: they gather around topics and vary along few directions within a
topic. Recall measured on uniform random vectors (where every neighbour is about as far as any other) says little
about a real corpus, so benchmarks and tests of compressed indices use this generator: each vector is a topic centre
plus a variation in a low-dimensional, topic-specific subspace plus a little isotropic noise, L2-normalised.
"""

from __future__ import annotations

import numpy as np

from fair_retrieval.validate import positive_int


def clustered_vectors(
    count: int,
    dim: int,
    clusters: int = 100,
    latent_dim: int = 8,
    noise: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """`count` unit vectors of size `dim`, float32, drawn around `clusters` random topic centres.

    Args:
        count: number of vectors.
        dim: vector size.
        clusters: number of topics (centres drawn uniformly on the sphere).
        latent_dim: dimensions of the within-topic variation (each topic has its own random subspace).
        noise: scale of the isotropic noise relative to the unit-norm centres.
        seed: random seed; the same arguments give the same vectors.

    Raises:
        ValueError: non-positive sizes or a negative noise.
    """
    for name, value in (("count", count), ("dim", dim), ("clusters", clusters), ("latent_dim", latent_dim)):
        positive_int(value, name)
    if noise < 0:
        raise ValueError(f"noise must be ≥ 0, got {noise!r}.")
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    bases = rng.standard_normal((clusters, latent_dim, dim)).astype(np.float32) / np.sqrt(dim)
    topics = rng.integers(0, clusters, size=count)
    vectors = np.empty((count, dim), dtype=np.float32)
    for start in range(0, count, 65_536):  # bounded memory for the (chunk, latent, dim) gather
        chosen = topics[start : start + 65_536]
        latent = rng.standard_normal((chosen.size, latent_dim)).astype(np.float32) / np.sqrt(latent_dim)
        variation = np.einsum("nk,nkd->nd", latent, bases[chosen])
        isotropic = noise * rng.standard_normal((chosen.size, dim)).astype(np.float32) / np.sqrt(dim)
        vectors[start : start + chosen.size] = centres[chosen] + variation + isotropic
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors
