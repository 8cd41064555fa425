"""What a session shows: the terminal and Markdown tables, the plots, the CI exports and the
session's report built from its results.json."""
