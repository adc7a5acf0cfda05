# The MCP Python SDK's client example ("A client in 10 lines" of the README
# of PyPI `mcp` 2.3.0; tests/examples/mcp_quickstart.py holds it as written)
# with its tool call changed: it calls tempora's `recall` tool instead of the
# example server's `add` (and the comment giving `add`'s result is dropped).
# Everything else is as written.
# Run by tests/python/examples_rest_mcp.py (scripts/examples.sh).

import asyncio

from mcp import Client


async def main() -> None:
    async with Client("http://localhost:8000/mcp") as client:
        result = await client.call_tool("recall", {"question": "where does sarah work?"})
        print(result.structured_content)


asyncio.run(main())
