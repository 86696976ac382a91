"""agentcore: a reference engine for the locked agent tool set.

The public entry points are `agentcore.manifest.load_manifest`,
`agentcore.engine.Engine` and `agentcore.session.Session`.
"""

__version__ = "0.1.0"
SPEC_VERSION = "0.1"
