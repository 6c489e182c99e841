"""Utilities: observation layout helpers, config resolution, checkpoints, logging."""
