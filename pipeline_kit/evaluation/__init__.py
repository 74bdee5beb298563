"""Evaluation of generated solutions: answer extraction, grading, metrics and the summaries of results
folders (`kit grade`, `kit summarize`)."""
