"""Synthetic multi-rank nsys traces with exact ground truth."""
