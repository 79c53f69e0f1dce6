"""Render stage: turn analysis results into text, CSV, JSON (and, later, charts and reports)."""
