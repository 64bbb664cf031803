"""`sage mcp`: SAGE's memory and harness as MCP tools for coding agents (docs/mcp.md).

service.py is the logic (SDK-free), worker.py the run's one thread, server.py the MCP SDK
adapter and its transports, client.py a small SDK client for scripted sessions. Not named `mcp`,
which would shadow the SDK.
"""
