"""A serving worker over the formulas: per-request decisions, its state folder, its HTTP face."""
