"""The vocabulary every folder speaks: case ids and profiles (cases), how figures read in text
(text), the statistics under the verdicts (stats), and files written so that nothing is lost
(storage). It imports nothing of the project."""
