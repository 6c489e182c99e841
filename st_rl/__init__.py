"""st_rl: reinforcement learning for legged robots in massively parallel simulation."""

from st_rl.utils.cpu_memory import request_huge_pages

__version__ = "0.1.0"

request_huge_pages()  # before the first CPU tensor: PyTorch reads the switch once
