"""Render stage: analysis results as text, CSV, JSON, Vega-Lite charts and HTML reports; it reads what analysis
hands it and computes nothing (one module per output)."""
