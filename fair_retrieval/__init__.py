"""fair-retrieval: dense retrieval that is fair to every part of a document.

Documents are embedded with attention calibration (arXiv 2606.02737) so that a passage whose relevant sentence sits
at its end is found as often as one where it sits at its start; queries stay plain.
"""

from fair_retrieval.attention import UnsupportedModelError
from fair_retrieval.calibration import Calibration
from fair_retrieval.embedder import FairEmbedder
from fair_retrieval.index import DocumentHit, FaissIndex, MultiVectorIndex
from fair_retrieval.positional import PositionalScaling
from fair_retrieval.windows import DocumentWindows

__all__ = [
    "Calibration",
    "DocumentHit",
    "DocumentWindows",
    "FairEmbedder",
    "FaissIndex",
    "MultiVectorIndex",
    "PositionalScaling",
    "UnsupportedModelError",
]
__version__ = "0.1.0"
