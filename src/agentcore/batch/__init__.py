"""Batches: many headless tasks, locally or on a Ray cluster, with results and reports."""
