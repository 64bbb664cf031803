"""`sage mcp`: SAGE's memory and harness as MCP tools for coding agents (docs/mcp.md).

service.py is the logic (SDK-free), worker.py the run's one thread (opened in the background,
owners, missed results), results.py the tools' output types and the one JSON boundary,
diagnosis.py the `diagnose` result, server_model.py the server's own (non-gating) model,
server.py the MCP SDK adapter and its transports, client.py a small SDK client for scripted
sessions. Not named `mcp`, which would shadow the SDK.
"""
