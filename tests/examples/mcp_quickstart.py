# The MCP Python SDK's client example, byte for byte below this header: "A
# client in 10 lines" of the README of PyPI `mcp` 2.3.0 (also the docstring
# of mcp.client.Client). It calls the tool `add` of the SDK's example server
# ("A server in 15 lines"); tempora has no such tool, so against tempora the
# call is answered "unknown tool" (see docs/examples.md, Differences).
# Run by tests/python/examples_rest_mcp.py (scripts/examples.sh).

import asyncio

from mcp import Client


async def main() -> None:
    async with Client("http://localhost:8000/mcp") as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
        print(result.structured_content)  # {'result': 3}


asyncio.run(main())
