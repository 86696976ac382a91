"""ACP front end: `agentcore acp` serves the agent to editors over the Agent Client Protocol.

This is the only package that imports the `acp` SDK (importing its schema
costs about 0.8 s), so commands that do not speak ACP never pay for it.

- `agent`: the ACP agent (sessions, prompts, permissions, cancel, load/list/close);
- `updates`: engine and loop events to `session/update` payloads, live and replayed alike;
- `stdio_guard`: bounded, checked lines in front of the SDK's reader.
"""
