"""nsight-analyze: answers from the Nsight traces of distributed GPU training."""

__version__ = "0.1.0"
