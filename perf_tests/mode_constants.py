"""Figures that a mode runs by and that tools also plan or judge with, defined once here so that a
tool never imports a mode's module for them."""

# The smallest change an A/B verdict names (its tolerance where --perf-tolerance gives none): both
# stacks run in the same minutes, so the band the stored-baseline gate needs for the host's drift
# (smoke 15%) is not needed here.
AB_TOLERANCE = 0.05
# The iterations of the profiled run (--perf-explain) that stores or explains a case's operator
# profile, after the case's warm-up iterations.
PROFILED_ITERATIONS = 3
# The two sides of an A/B session, as its rows in results.json name them.
REFERENCE, CANDIDATE = "reference", "candidate"
