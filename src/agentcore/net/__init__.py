"""Network layer: host canonicalisation and patterns, address vetting,
the web_fetch engine and the host-side filtering proxy for sandboxes.

Submodules are imported explicitly (``agentcore.net.hosts`` etc.) so that
importing this package stays cheap.
"""
