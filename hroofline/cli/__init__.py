"""Command-line interface: one module per group of commands, wired together in main.py."""
