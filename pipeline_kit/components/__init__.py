"""Job components: the model server (server.py), the code sandbox (sandbox.py) and the generation client
(client.py) as Commands of the declarative layer, each handed the others' addresses, and the check of their
interpreters where the job runs (python_check.py). Submission side: the programs they start live in servers/,
sandbox/ and inference/."""
