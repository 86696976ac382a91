"""The agent host: a model loop over the engine (issue: agent host).

- `messages`: the conversation, provider-neutral (what the recorder stores);
- `model`: the seam to model providers (`ModelClient`), provider errors, usage;
- `providers`: pydantic-ai as the provider layer (imported only when a model runs);
- `script`: the embedded scripted model, served as an OpenAI-compatible loopback server;
- `config`: which model, from the manifest's `model:` block, CLI flags and the environment;
- `prompt`: the system prompt assembled from the manifest;
- `loop`: `AgentLoop`, which owns every step: model requests, tool calls through the engine, events, cancellation;
- `headless`: one unattended run (ask = deny), used by `agentcore run` and batches.
"""
