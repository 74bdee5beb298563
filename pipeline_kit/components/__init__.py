"""Job components: the model server (server.py), the code sandbox (sandbox.py) and the generation client
(client.py) as Commands of the declarative layer, each handed the others' addresses. Submission side: the programs
they start live in servers/, sandbox/ and inference/."""
