"""The MCP Python SDK's client example and the examples of the memory API's
reference document (api/abagraph.openapi.json), run against the real
`tempora serve`. Runs in the venv of PyPI `mcp` 2.3.0 (with `jsonschema`),
pinned by scripts/mcp-clients.sh.

MCP (open mode): tests/examples/mcp_quickstart.py, "A client in 10 lines" of
the SDK's README, run as its own process. It is written for
http://localhost:8000/mcp: tempora is started on 127.0.0.1:8000 when that
port is free, else on a free port and the example runs from a copy with that
one address replaced. It calls `add`, the tool of the SDK's example server,
which tempora does not have: the run passes when it connects and the only
error is the server's "unknown tool" answer to that call (a documented
difference, docs/examples.md). tests/examples/mcp_quickstart_recall.py, the
same example calling tempora's `recall`, must exit 0.

The reference document (keyed mode: tenant `demo`, the tenant its MCP
example names, with the key `YOUR_TENANT_KEY` that its session example
sends): every operation with an example (a request body, a parameter, or a
response) is called with the example as written, with
`Authorization: Bearer YOUR_TENANT_KEY` (except the operations that need no
auth), in an order where reads find data (the assert before the query,
digest before ask). Each answer must have one of the operation's documented
2xx statuses and a body that validates against the documented schema
(`$ref`s resolved within the document). Response-only examples (health, the
SSE stream) are compared by shape. An operation with an example this runner
does not know fails, so a new example in the document is not skipped.

Prints `ok <name>` / `FAILED <name>: why`; exits 1 on any failure.

Usage: examples_rest_mcp.py --bin target/debug/tempora
"""

import argparse
import contextlib
import http.client
import json
import os
import queue
import re
import socket
import sys
import tempfile
import threading
import urllib.parse

import jsonschema

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from examples_common import (  # noqa: E402
    EXAMPLE_SECONDS, ROOT, ExampleTimeout, check, example_source, finish, python, run, run_example, serve, tail)

DOC_PATH = os.path.join(ROOT, "api", "abagraph.openapi.json")
TENANT = "demo"
KEY = "YOUR_TENANT_KEY"
WRITTEN_FOR = "http://localhost:8000"
METHODS = ("get", "put", "post", "delete", "patch")


# --- MCP: the SDK's README client ---------------------------------------------------

def mcp_example(srv, name, expect_unknown_add):
    with tempfile.TemporaryDirectory(prefix="mcp-example-") as tmp:
        verbatim = srv.http_port == 8000
        path, how = example_source(name, tmp, written_for=WRITTEN_FOR, base=None if verbatim else srv.base)
        try:
            rc, out, err = run_example([python(), path], cwd=tmp)
        except ExampleTimeout as e:
            raise AssertionError(f"{e} ({how}); output: {tail(e.stdout)} {tail(e.stderr)}")
    if rc == 0:
        return out, how
    if expect_unknown_add:
        # The traceback's exception lines: only the task group wrapping the
        # server's answer to `add` may be there.
        raised = [line.strip(" |") for line in err.splitlines()
                  if re.match(r"^[\s|+]*[\w.]*(Error|Exception|ExceptionGroup)\b.*: ", line)]
        unknown = [r for r in raised if re.search(r'MCPError: unknown tool "add"', r)]
        others = [r for r in raised if r not in unknown and not re.match(r"^(Base)?ExceptionGroup: ", r)]
        check(unknown and not others, f"exit {rc} ({how}): {tail(err, 4)}")
        return None, how
    raise AssertionError(f"exit {rc} ({how}): {tail(err or out, 4)}")


def mcp_checks(binary):
    with serve(binary, prefer_http_port=8000) as srv:
        # Something for recall to find: the reference document's assert example.
        status, _, body = request(srv.base, "post", "/api/facts", doc_example_body("post", "/api/facts"), key=None)
        check(status == 201, f"seeding a fact: {status} {body[:200]!r}")

        def quickstart():
            out, how = mcp_example(srv, "mcp_quickstart.py", expect_unknown_add=True)
            if out is not None:
                return f"{how}; exited 0: {tail(out, 2)}"
            return (f"{how}; connected, and its call of `add` (the SDK example server's tool) was answered "
                    f"'unknown tool \"add\"', as tempora has no such tool: documented difference")

        def quickstart_recall():
            out, how = mcp_example(srv, "mcp_quickstart_recall.py", expect_unknown_add=False)
            check("'facts'" in out and "Org:acme" in out, f"printed {tail(out, 3)!r}")
            return f"{how}; exited 0, structured_content has the fact"

        run("mcp README client (mcp 2.3.0 \"A client in 10 lines\")", quickstart)
        run("mcp README client calling recall (the tool call changed)", quickstart_recall)


# --- HTTP ----------------------------------------------------------------------------

def request(base, method, path, body=None, *, key=KEY, query=None, headers=None):
    """One request; returns (status, headers as a dict of lower-case names, body bytes)."""
    u = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=EXAMPLE_SECONDS)
    h = dict(headers or {})
    if key is not None:
        h["Authorization"] = f"Bearer {key}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    target = path + ("?" + urllib.parse.urlencode(query) if query else "")
    try:
        conn.request(method.upper(), target, body=data, headers=h)
        r = conn.getresponse()
        got = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, got
    finally:
        conn.close()


# --- the reference document ----------------------------------------------------------

with open(DOC_PATH, encoding="utf-8") as f:
    DOC = json.load(f)


def resolve(obj):
    while isinstance(obj, dict) and "$ref" in obj and len(obj) == 1:
        ref = obj["$ref"]
        check(ref.startswith("#/"), f"external $ref {ref}")
        obj = DOC
        for part in ref[2:].split("/"):
            obj = obj[part.replace("~1", "/").replace("~0", "~")]
    return obj


def operation(method, path):
    return DOC["paths"][path][method]


def doc_example_body(method, path):
    return operation(method, path)["requestBody"]["content"]["application/json"]["example"]


def parameters(method, path):
    op = operation(method, path)
    return [resolve(p) for p in DOC["paths"][path].get("parameters", []) + op.get("parameters", [])]


def param_examples(method, path):
    """{(in, name): example} of the operation's parameters that have one."""
    got = {}
    for p in parameters(method, path):
        ex = p.get("example", (p.get("schema") or {}).get("example"))
        if ex is not None:
            got[(p["in"], p["name"])] = ex
    return got


def has_example(method, path):
    op = operation(method, path)
    body = (op.get("requestBody") or {}).get("content", {})
    if any("example" in c or "examples" in c for c in body.values()):
        return True
    if param_examples(method, path):
        return True
    for code, resp in op.get("responses", {}).items():
        if code.startswith("2") and any("example" in c or "examples" in c
                                        for c in (resolve(resp).get("content") or {}).values()):
            return True
    return False


def validator(schema):
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": DOC["components"],
            "allOf": [schema]}
    return jsonschema.Draft202012Validator(root)


def schema_errors(schema, value):
    errors = sorted(validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    return "; ".join(f"at /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:3])


def expect_documented(method, path, status, headers, body):
    """The status is one of the operation's documented 2xx; the body
    validates against that response's schema. Returns the decoded body."""
    op = operation(method, path)
    documented = sorted(c for c in op["responses"] if c.startswith("2"))
    shown = body[:600].decode(errors="replace")
    check(str(status) in documented,
          f"{method.upper()} {path}: status {status}, documented {documented}; body {shown}")
    resp = resolve(op["responses"][str(status)])
    content = resp.get("content") or {}
    if "application/json" not in content:
        return body
    ctype = headers.get("content-type", "")
    check(ctype.startswith("application/json"), f"{method.upper()} {path}: content-type {ctype!r}")
    value = json.loads(body)
    errs = schema_errors(content["application/json"]["schema"], value)
    check(not errs, f"{method.upper()} {path}: {status} body does not validate against the documented schema: "
                    f"{errs}; body {shown}")
    return value


def call_example(base, method, path, *, key=KEY):
    """Sends the operation's examples as written: the request body example,
    and each parameter example (query or header). Returns (status, headers,
    body, what was sent)."""
    op = operation(method, path)
    body = None
    if "requestBody" in op:
        media = op["requestBody"]["content"]["application/json"]
        body = media["example"]
        errs = schema_errors(media["schema"], body)
        check(not errs, f"the request example does not validate against its own schema: {errs}")
    query, headers = {}, {}
    for (where, name), ex in param_examples(method, path).items():
        if where == "query":
            query[name] = ex
        elif where == "header":
            headers[name] = ex
        else:
            raise AssertionError(f"a {where} parameter example ({name}): no runner for it")
    status, got_headers, got = request(base, method, path, body, key=key, query=query or None, headers=headers)
    sent = f"{method.upper()} {path}" + (f"?{urllib.parse.urlencode(query)}" if query else "") + \
        "".join(f" [{k}: {v}]" for k, v in headers.items()) + (f" {json.dumps(body)}" if body is not None else "")
    return status, got_headers, got, sent


class Stream:
    """GET /api/stream read in a thread: its SSE `data:` payloads arrive on a queue."""

    def __init__(self, base):
        u = urllib.parse.urlsplit(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=EXAMPLE_SECONDS)
        self.conn.request("GET", "/api/stream", headers={"Authorization": f"Bearer {KEY}",
                                                         "Accept": "text/event-stream"})
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}
        self.events = queue.Queue()
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        # read1: what has arrived, without waiting for a full buffer.
        pending = b""
        try:
            while True:
                chunk = self.resp.read1(65536)
                if not chunk:
                    raise EOFError("closed by the server")
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    line = raw.decode("utf-8", errors="replace").rstrip("\r")
                    if line.startswith("data:"):
                        self.events.put(line[5:].lstrip(" "))
        except Exception as e:  # the connection closing ends the reader
            self.events.put(e)

    def next(self, seconds):
        try:
            got = self.events.get(timeout=seconds)
        except queue.Empty:
            raise AssertionError(f"no event within {seconds} s")
        if isinstance(got, Exception):
            raise AssertionError(f"the stream ended: {got}")
        return got

    def close(self):
        # Wake the reader first: closing the response waits for its read.
        with contextlib.suppress(OSError):
            if self.conn.sock is not None:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()


def same_shape(example, got, where="event"):
    """Every key of the example is there with a value of the same JSON kind
    (recursively); null in the example stands for any value."""
    if example is None:
        return
    def kind(v):
        return "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__
    check(kind(example) == kind(got),
          f"{where}: {json.dumps(got)[:200]} is not like the example's {json.dumps(example)[:200]}")
    if isinstance(example, dict):
        for k, v in example.items():
            check(k in got, f"{where}: no {k!r} (the example has it): {json.dumps(got)[:300]}")
            same_shape(v, got[k], f"{where}.{k}")


def sse_data(text):
    """The JSON of the first `data:` line of an SSE text."""
    for line in text.splitlines():
        if line.startswith("data:"):
            return json.loads(line[5:].lstrip(" "))
    raise AssertionError(f"no data: line in {text[:200]!r}")


def rest_checks(binary):
    handled = set()

    def op_name(method, path):
        handled.add((method, path))
        return f"openapi {method.upper()} {path} ({operation(method, path)['operationId']})"

    env = {"TEMPORA_TENANT_KEYS": f"{TENANT}={KEY}"}
    with serve(binary, env=env) as srv:
        base = srv.base
        state = {}

        def health():
            status, headers, body = request(base, "get", "/api/health", key=None)
            value = expect_documented("get", "/api/health", status, headers, body)
            example = operation("get", "/api/health")["responses"]["200"]["content"]["application/json"]["example"]
            check(value == example, f"GET /api/health answered {value}, the example is {example}")
            return f"{status} {json.dumps(value)}, as the example"

        def session():
            status, headers, body, sent = call_example(base, "post", "/api/session", key=None)
            value = expect_documented("post", "/api/session", status, headers, body)
            check(value.get("scope") == "tenant" and value.get("tenant") == TENANT, f"{sent}: answered {value}")
            cookie = headers.get("set-cookie", "")
            check("HttpOnly" in cookie, f"{sent}: Set-Cookie {cookie.split('=')[0]!r}... without HttpOnly")
            return f"{status} {json.dumps(value)}, Set-Cookie {cookie.split('=')[0]} (HttpOnly)"

        def stream_open():
            stream = Stream(base)
            state["stream"] = stream
            check(stream.status == 200, f"GET /api/stream: status {stream.status}")
            check("no-cache" in stream.headers.get("cache-control", ""),
                  f"Cache-Control {stream.headers.get('cache-control')!r}, documented no-cache")
            ctype = stream.headers.get("content-type", "")
            check(ctype.startswith("text/event-stream"), f"content-type {ctype!r}")

        def assert_fact():
            status, headers, body, sent = call_example(base, "post", "/api/facts")
            value = expect_documented("post", "/api/facts", status, headers, body)
            state["fact"] = value
            state["assert"] = (sent, status, body)
            return f"{status}, fact {value.get('id')}"

        def idempotent_retry():
            sent, status, body = state["assert"]
            again, headers, body_again, _ = call_example(base, "post", "/api/facts")
            check(again == status and body_again == body,
                  f"the retry of {sent} answered {again} {body_again[:300]!r}, not the first answer")
            check(headers.get("idempotency-replayed") == "true",
                  f"the retry has no Idempotency-Replayed: true header: {headers}")
            return "the retry with the example key got the first answer, Idempotency-Replayed: true"

        def stream_event():
            stream = state["stream"]
            example_text = operation("get", "/api/stream")["responses"]["200"]["content"]["text/event-stream"][
                "example"]
            example = sse_data(example_text)
            data = stream.next(30)
            event = json.loads(data)
            same_shape(example, event)
            check(event.get("op") == "assert" and event["fact"].get("id") == state["fact"].get("id"),
                  f"the first event is not the assert: {data[:300]}")
            errs = schema_errors({"$ref": "#/components/schemas/Fact"}, event["fact"])
            check(not errs, f"the event's fact does not validate as a Fact: {errs}")
            stream.close()
            return "the first event after the assert parses like the example (op, tx, fact)"

        def list_facts():
            status, headers, body, sent = call_example(base, "get", "/api/facts")
            value = expect_documented("get", "/api/facts", status, headers, body)
            check(any(f.get("id") == state["fact"].get("id") for f in value),
                  f"{sent}: the asserted fact is not listed: {body[:300]!r}")
            return f"{status}, {len(value)} fact(s) with the asserted one"

        def plain(method, path, then=None):
            def go():
                status, headers, body, sent = call_example(base, method, path)
                value = expect_documented(method, path, status, headers, body)
                note = then(value, sent) if then else None
                return note or f"{status}"
            return go

        def search_finds(value, sent):
            ids = [f.get("id") for f in value.get("answer_facts", [])]
            check(state["fact"].get("id") in ids, f"{sent}: answer_facts {ids} miss the asserted fact")

        def ask_answers(value, sent):
            check("acme" in (value.get("answer") or "").lower(), f"{sent}: answer {value.get('answer')!r}")

        def mcp_result(value, sent):
            check("error" not in value, f"{sent}: JSON-RPC error {json.dumps(value.get('error'))}")
            result = value.get("result") or {}
            check(result.get("isError") is not True, f"{sent}: tool error {json.dumps(result)[:400]}")
            packet = result.get("structuredContent") or {}
            errs = schema_errors({"$ref": "#/components/schemas/ContextPacket"}, packet)
            check(not errs, f"{sent}: structuredContent is not a ContextPacket: {errs}")
            check(any(f.get("id") == state["fact"].get("id") for f in packet.get("facts", [])),
                  f"{sent}: the packet misses the asserted fact: {json.dumps(packet)[:400]}")

        try:
            run(op_name("get", "/api/health") + " response example", health)
            run(op_name("post", "/api/session") + " request example (no auth)", session)
            run(op_name("get", "/api/stream") + " subscribe", stream_open)
            run(op_name("post", "/api/facts") + " request example, Idempotency-Key example", assert_fact)
            run("openapi Idempotency-Key parameter example: a retry is replayed", idempotent_retry)
            if "stream" in state and state["stream"].status == 200:
                run("openapi GET /api/stream response example: the first event after the assert", stream_event)
            run(op_name("get", "/api/facts") + " status parameter example", list_facts)
            run(op_name("post", "/api/search") + " request example", plain("post", "/api/search", search_finds))
            run(op_name("post", "/api/context") + " request example", plain("post", "/api/context"))
            run(op_name("post", "/api/connectors") + " request example", plain("post", "/api/connectors"))
            run(op_name("post", "/api/digest") + " request example, Idempotency-Key example",
                plain("post", "/api/digest"))
            run(op_name("post", "/api/ask") + " request example", plain("post", "/api/ask", ask_answers))
            run(op_name("post", "/mcp") + " request example (tools/call build_context, namespace demo)",
                plain("post", "/mcp", mcp_result))
        finally:
            if "stream" in state:
                state["stream"].close()

    def all_covered():
        with_examples = {(m, p) for p, ops in DOC["paths"].items() for m in ops if m in METHODS and has_example(m, p)}
        missing = sorted(with_examples - handled)
        check(not missing, f"operations with examples this runner does not call: {missing}")
        return f"{len(with_examples)} operations with examples, all called"

    run("openapi every operation with an example is called", all_covered)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/tempora")
    args = ap.parse_args()
    run_section(lambda: mcp_checks(args.bin), "mcp: server")
    run_section(lambda: rest_checks(args.bin), "openapi: server")
    return finish()


def run_section(fn, name):
    """A section whose server does not start is one failure, and the others still run."""
    try:
        fn()
    except Exception as e:
        def failed():
            raise e
        run(name, failed)


if __name__ == "__main__":
    sys.exit(main())
