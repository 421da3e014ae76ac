"""The MCP endpoint: Engram's memory tools for agents over Streamable HTTP.

``handlers`` holds the tool logic as plain synchronous functions (scope check, end-user
resolution, one service or selector call); ``server`` declares the tools with the official
``mcp`` SDK and maps errors; ``asgi`` authenticates requests and mounts the endpoint next to
Django.
"""
