"""Solution selection: picking one answer out of N sampled solutions to a problem (majority and weighted votes
over grader-equivalent answers, and GenSelect's tournament, where the model compares the solutions and names the
best). Above grading only: the model is asked through the caller (inference/genselect.py)."""
