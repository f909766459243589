"""Analysis: path classes, rails and findings from the topology (pure)."""
