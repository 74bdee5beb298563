"""The code-execution sandbox: an HTTP server (`server`), its fork-server workers (`worker`) that isolate every
execution with Linux namespaces and rlimits (`isolation`, `limits`), the code runner inside (`runner`) and a client."""
