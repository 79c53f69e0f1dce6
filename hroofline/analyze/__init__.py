"""Analysis stage: tables and figures computed from runs, with no rendering."""
