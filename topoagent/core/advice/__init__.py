"""Advice: per-GPU plans of CPUs, NICs and environment, and VM placement, from the analysis (pure)."""
