"""Evaluation of graded results: metrics (pass@k, majority and GenSelect modes), LLM-judge verdicts and the
summaries of results folders (`kit summarize`). Grading itself lives in pipeline_kit.grading."""
