"""The old modules of `deployment`, found as `deployment.X` (see old_paths)."""
