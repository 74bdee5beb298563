"""The code-execution sandbox: an HTTP server (`server`), its fork-server workers (`worker`) that isolate every
execution with Linux namespaces and rlimits (`isolation`, `limits`), the code runner inside (`runner`) and a client.
Runs inside jobs; its Command in a job is pipeline_kit.components.sandbox."""
