"""ACP front end for the agentcore engine.

This is the only package that imports the `acp` SDK (importing its schema
costs about 0.8 s), so commands that do not speak ACP never pay for it.
The adapter itself is tracked as its own piece of work; the engine already
exposes what it needs: ACP kinds on every envelope, `Envelope.ui` for diffs,
`AskBroker` for `session/request_permission`, and `Session.abort` for
`session/cancel`.
"""
