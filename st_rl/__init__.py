"""st_rl: reinforcement learning for legged robots in massively parallel simulation."""

__version__ = "0.1.0"
