"""The `kit` command line: `main` (entry point, error handling, help cache), `app` (the typer app),
`job_flags` (the flags every job command shares, declared once) and one module per command family."""
