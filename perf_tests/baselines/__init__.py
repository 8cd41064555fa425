"""Baselines: the file format (file.py), the session's store every mode reads and updates
through (store.py), and the rule that decides whether runs may become an entry (checks.py)."""
