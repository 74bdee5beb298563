"""Solution selection: picking one answer out of N sampled solutions to a problem (majority and weighted votes
over grader-equivalent answers; GenSelect and SC-TIR build on them)."""
