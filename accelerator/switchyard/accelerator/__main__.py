"""`python -m switchyard.accelerator ...` runs the `simulate` command group."""

from __future__ import annotations

from switchyard.accelerator.cli import simulate

if __name__ == "__main__":
    simulate()
