"""Grading: answer extraction, normalisation, the equivalence of two answers (math_grader, numeric), the grader pool
that runs it in worker processes, and grading result files in place (`kit grade`). The bottom layer: of kit it
imports only the leaf helpers errors, atomic and jsonl."""
