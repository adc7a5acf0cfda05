"""The MCP endpoint driven by the official Python SDK (PyPI `mcp`, 1.x or 2.x).

Run by scripts/mcp-clients.sh once per SDK major version, each in its own venv:

    python tests/python/mcp_client_test.py --bin target/debug/tempora

It starts `tempora serve` twice (open mode, then keyed mode) on a free port
with a temporary data directory, connects with the SDK's Streamable HTTP
client, lists the tools, calls every tool with valid and invalid arguments,
validates each `structuredContent` against the tool's declared output schema
(jsonschema), checks the namespace pin of tenant keys, and the session
behaviour (no session id is issued; every request stands alone). Exits
non-zero on the first failure and ends with a line "N passed, N failed".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib.metadata import version as pkg_version

import urllib.error

import jsonschema

MCP_VERSION = pkg_version("mcp")
MAJOR = int(MCP_VERSION.split(".")[0])

NAS_KEY = "nas-key-1"
ACME_KEY = "acme-key-1"
ADMIN = "adm-secret-1"
TOOLS = {"build_context", "digest", "explain_fact", "recall", "recall_as_of", "remember", "whats_changed"}
Y2020 = 1577836800000
Y2022 = 1640995200000
Y2024 = 1704067200000

passed = 0
failed = 0


def check(cond: bool, what: str) -> None:
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        raise AssertionError(what)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(binary: str, env: dict[str, str]):
    with tempfile.TemporaryDirectory(prefix="tempora-mcp-") as tmp:
        port = free_port()
        full = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORA_")}
        full.update(env)
        full.update({"TEMPORA_LOG": "warn", "NO_COLOR": "1"})
        log = open(os.path.join(tmp, "server.log"), "wb")
        proc = subprocess.Popen(
            [binary, "serve", "--data-dir", os.path.join(tmp, "data"), "--http-addr", f"127.0.0.1:{port}",
             "--grpc-addr", "off", "--tcp-addr", "off"],
            env=full, stdout=log, stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + 30
            while True:
                try:
                    urllib.request.urlopen(base + "/healthz", timeout=1)
                    break
                except Exception:
                    if proc.poll() is not None or time.time() > deadline:
                        raise RuntimeError("tempora did not start: " + open(log.name).read())
                    time.sleep(0.1)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


# --- one connected client, whatever the SDK version ---------------------------

class Conn:
    """A connected SDK session: list_tools / call_tool, and the session id the
    transport saw (None when the server issues none)."""

    def __init__(self, session, get_session_id, negotiated: str):
        self.session = session
        self.get_session_id = get_session_id
        self.negotiated = negotiated

    async def list_tools(self):
        return (await self.session.list_tools()).tools

    async def call(self, name: str, args: dict):
        return await self.session.call_tool(name, args)


@contextlib.asynccontextmanager
async def connect(url: str, key: str | None):
    headers = {"Authorization": f"Bearer {key}"} if key else None
    if MAJOR >= 2:
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        import httpx2

        http = httpx2.AsyncClient(headers=headers, timeout=30) if headers else None
        transport = streamable_http_client(url, http_client=http) if http else streamable_http_client(url)
        async with Client(transport) as client:
            s = client.session
            if getattr(s, "discover_result", None) is not None:
                negotiated = "discover"
            else:
                negotiated = s.initialize_result.protocol_version
            yield Conn(client, lambda: None, negotiated)
        if http:
            await http.aclose()
    else:
        from mcp import ClientSession
        from mcp.client.streamable_http import streamablehttp_client

        async with streamablehttp_client(url, headers=headers) as (read, write, get_session_id):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                yield Conn(session, get_session_id, init.protocolVersion)


def structured(res):
    return getattr(res, "structuredContent", None) if hasattr(res, "structuredContent") else res.structured_content


def is_error(res) -> bool:
    return bool(res.isError if hasattr(res, "isError") else res.is_error)


def output_schema(tool):
    return getattr(tool, "outputSchema", None) if hasattr(tool, "outputSchema") else tool.output_schema


def input_schema(tool):
    return getattr(tool, "inputSchema", None) if hasattr(tool, "inputSchema") else tool.input_schema


def text_of(res) -> str:
    return "".join(getattr(c, "text", "") for c in res.content)


class Suite:
    def __init__(self, conn: Conn, schemas: dict):
        self.conn = conn
        self.schemas = schemas

    async def ok(self, name: str, args: dict) -> dict:
        res = await self.conn.call(name, args)
        check(not is_error(res), f"{name}({args}) failed: {text_of(res)}")
        sc = structured(res)
        check(isinstance(sc, dict), f"{name}: no structuredContent")
        jsonschema.validate(sc, self.schemas[name])
        check(json.loads(text_of(res)) == sc, f"{name}: the text item is not the structured JSON")
        return sc

    async def fails(self, name: str, args: dict) -> str:
        res = await self.conn.call(name, args)
        check(is_error(res), f"{name}({args}) should fail, got {structured(res)}")
        return text_of(res)


async def open_mode(binary: str) -> None:
    with serve(binary, {}) as base:
        async with connect(base + "/mcp", None) as conn:
            print(f"  connected ({conn.negotiated}); session id: {conn.get_session_id()}")
            check(conn.get_session_id() is None, "no session id is issued")
            tools = await conn.list_tools()
            check({t.name for t in tools} == TOOLS, f"tools: {[t.name for t in tools]}")
            schemas = {}
            for t in tools:
                check(input_schema(t)["type"] == "object", f"{t.name} inputSchema")
                check(output_schema(t) is not None and output_schema(t)["type"] == "object", f"{t.name} outputSchema")
                jsonschema.Draft202012Validator.check_schema(input_schema(t))
                jsonschema.Draft202012Validator.check_schema(output_schema(t))
                check(len(t.description or "") > 40, f"{t.name} description")
                schemas[t.name] = output_schema(t)
            s = Suite(conn, schemas)

            acme = await s.ok("remember", {"subject": "Person:sarah", "predicate": "works_at", "object": "Org:acme",
                                           "valid_from": Y2020, "source": "hr-feed", "confidence": 0.9})
            await asyncio.sleep(0.02)
            globex = await s.ok("remember", {"subject": "Person:sarah", "predicate": "works_at",
                                             "object": "Org:globex", "valid_from": Y2024,
                                             "properties": {"title": "staff engineer"}})
            check(globex["superseded"] == [acme["fact"]["id"]], "globex supersedes acme")
            await s.fails("remember", {"subject": "Person:sarah"})
            await s.fails("remember", {"subject": "Person:sarah", "predicate": "p", "object": 1, "confidence": 3})

            r = await s.ok("recall", {"question": "where does sarah work", "top_k": 3, "seeds": ["Person:sarah"]})
            check(r["facts"][0]["object"] == "Org:globex", f"recall: {r['facts']}")
            await s.fails("recall", {"question": ""})
            await s.fails("recall", {"question": "x", "top_k": 1000})

            r = await s.ok("recall_as_of", {"subject": "Person:sarah", "predicate": "works_at", "valid_at": Y2022})
            check([f["object"] for f in r["facts"]] == ["Org:acme"], f"valid_at 2022: {r['facts']}")
            r = await s.ok("recall_as_of", {"subject": "Person:sarah", "as_of": acme["fact"]["recorded_at"]})
            check(r["facts"][0]["object"] == "Org:acme" and r["facts"][0]["valid_until"] is None, "as_of")
            r = await s.ok("recall_as_of", {"question": "sarah works at", "valid_at": Y2024 + 1})
            check(all(f["object"] == "Org:globex" for f in r["facts"]), f"question + valid_at: {r['facts']}")
            await s.fails("recall_as_of", {"as_of": 1, "as_of_tx": 1})

            r = await s.ok("whats_changed", {"limit": 1})
            check(r["next_cursor"] is not None, "whats_changed pages")
            r2 = await s.ok("whats_changed", {"cursor": r["next_cursor"]})
            check(r2["next_cursor"] is None and len(r2["changes"]) == 1, f"second page: {r2}")
            await s.fails("whats_changed", {"limit": 0})

            r = await s.ok("build_context", {"task": "brief me on Sarah before a 1:1", "seeds": ["Person:sarah"],
                                             "max_tokens": 80})
            check(any(f["object"] == "Org:globex" for f in r["facts"]), f"context: {r['facts']}")
            await s.fails("build_context", {})

            r = await s.ok("explain_fact", {"id": acme["fact"]["id"]})
            check(r["successors"][0]["id"] == globex["fact"]["id"], "explain_fact chain")
            check(r["provenance"]["source"] == "hr-feed", "explain_fact provenance")
            await s.fails("explain_fact", {"id": "nope"})

            r = await s.ok("digest", {"content": "# Sarah\n\nSarah joined Acme as a staff engineer in 2024.",
                                      "source": "notes"})
            check(r["source"] == "notes" and r["page"].startswith("Page:"), f"digest receipt: {r}")
            await s.fails("digest", {"content": ""})
            await s.fails("digest", {"content": "x", "mask": "nope"})

            await s.fails("recall", {"question": "x", "namespace": "elsewhere"})

            # Unknown tool: a JSON-RPC error (-32602), raised by the SDK or
            # (some versions) turned into an error result.
            try:
                res = await conn.call("no_such_tool", {})
                check(is_error(res), "unknown tool is an error")
            except Exception as e:  # McpError / MCPError
                code = getattr(getattr(e, "error", None), "code", None)
                check(code in (-32602, None), f"unknown tool code {code}: {e}")

        # Every request stands alone: a second client sees the first's writes.
        async with connect(base + "/mcp", None) as conn:
            res = await conn.call("recall", {"question": "sarah"})
            check(not is_error(res) and len(structured(res)["facts"]) > 0, "a new connection needs no session")


async def keyed_mode(binary: str) -> None:
    env = {"TEMPORA_TENANT_KEYS": f"nas={NAS_KEY},acme={ACME_KEY}", "TEMPORA_ADMIN_TOKENS": ADMIN}
    with serve(binary, env) as base:
        # No key: the SDK cannot even connect (404 non-disclosure).
        with contextlib.suppress(Exception):
            got_in = False
            async with connect(base + "/mcp", None):
                got_in = True
        check(not got_in, "no key, no connection")
        req = urllib.request.Request(
            base + "/mcp", data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        try:
            urllib.request.urlopen(req, timeout=10)
            check(False, "no key must not be answered")
        except urllib.error.HTTPError as e:
            body = json.loads(e.read())
            check(e.code == 404 and body == {"error": {"code": "NotFound", "message": "not found"}},
                  f"non-disclosure: {e.code} {body}")

        async with connect(base + "/mcp", NAS_KEY) as nas:
            tools = {t.name: output_schema(t) for t in await nas.list_tools()}
            s = Suite(nas, tools)
            f = await s.ok("remember", {"subject": "Person:sarah", "predicate": "works_at", "object": "Org:nas-only"})
            check(f["fact"]["tenant"] == "nas", "stored in the key's namespace")
            await s.ok("recall", {"question": "sarah", "namespace": "nas"})
            msg = await s.fails("recall", {"question": "sarah", "namespace": "acme"})
            check("nas-only" not in msg, "no data in the error")
            await s.fails("remember", {"subject": "Person:x", "predicate": "p", "object": 1, "namespace": "acme"})
        async with connect(base + "/mcp", ACME_KEY) as acme:
            s = Suite(acme, tools)
            r = await s.ok("recall", {"question": "sarah works"})
            check(r["facts"] == [], f"acme sees nothing of nas: {r['facts']}")
            await s.fails("explain_fact", {"id": f["fact"]["id"]})
        async with connect(base + "/mcp", ADMIN) as admin:
            s = Suite(admin, tools)
            await s.fails("recall", {"question": "sarah"})
            r = await s.ok("recall", {"question": "sarah works", "namespace": "nas"})
            check(r["facts"][0]["object"] == "Org:nas-only", "admin reads a named namespace")


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/tempora")
    args = ap.parse_args()
    print(f"mcp {MCP_VERSION} (python {sys.version.split()[0]})")
    ok = True
    for name, case in (("open mode", open_mode), ("keyed mode", keyed_mode)):
        try:
            await asyncio.wait_for(case(args.bin), timeout=180)
            print(f"  {name}: ok")
        except BaseException as e:  # report and go on to the next case
            ok = False
            print(f"  {name}: FAILED: {type(e).__name__}: {e}")
            import traceback
            traceback.print_exc()
    failures = failed if failed else (0 if ok else 1)
    print(f"mcp {MCP_VERSION}: {passed} passed, {failures} failed")
    return 0 if ok and failed == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
