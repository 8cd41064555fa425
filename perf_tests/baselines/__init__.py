"""Baseline files: the format and its typed entry, read with checks and updated atomically (file),
the lineage an entry keeps of the ones it replaced (lineage), what an entry is made of from a
results row (entries) and whether runs may become one (checks). It may import core and
environment; the session's store of the file, which every mode reads and updates through, is
perf_tests/context/baseline_store.py."""
