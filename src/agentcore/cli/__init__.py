"""The `agentcore` command line."""
