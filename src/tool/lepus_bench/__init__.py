"""lepus-bench: the benchmark driver (see cli.py)."""
