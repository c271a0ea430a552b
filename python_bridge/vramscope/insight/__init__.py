"""Model insight: per-layer saved activations, a per-device breakdown, memory holders.

Needs torch: importing this package raises ImportError when torch is missing. IPython is not
imported here; the engine works on any namespace dict.
"""

from ..messages.insight import empty_insight
from .engine import InsightEngine

__all__ = ["InsightEngine", "empty_insight"]
