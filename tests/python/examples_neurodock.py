"""The NeuroDock TCP API's own examples (its spec, neurodock-tcp-api.md), in
the spec's order, over a raw TCP socket against the real `tempora serve`
(open mode, so no AUTH; a free port read from "tcp listening on ...").

The packets are tests/examples/neurodock_*.jsonc: the spec's JSON as written,
sent with its `//` comments taken out, one packet per line (raw framing,
docs/neurodock.md). The two tool definitions are the `data` of the spec's
ADD_TOOL base packet. Each answer must be the documented success packet
(TOOL_ADDED, RESPONSE); the `%0` query must come back with the date that
get_current_date gave, shaped like the spec's example result.

Only the standard library. Prints `ok <name>` / `FAILED <name>: why` per
example; exits 1 on any failure.

Usage: examples_neurodock.py --bin target/debug/tempora
"""

import argparse
import copy
import json
import os
import re
import socket
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from examples_common import EXAMPLES, EXAMPLE_SECONDS, check, finish, run, serve  # noqa: E402


def strip_comments(text):
    """The JSON of a .jsonc file: every `//` outside a string, to the end of
    its line, taken out."""
    out, i, in_string = [], 0, False
    while i < len(text):
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def example(name):
    with open(os.path.join(EXAMPLES, name), encoding="utf-8") as f:
        return json.loads(strip_comments(f.read()))


class Connection:
    def __init__(self, addr):
        self.sock = socket.create_connection(addr, timeout=EXAMPLE_SECONDS)
        self.reader = self.sock.makefile("rb")

    def ask(self, packet):
        """Sends one raw packet (a line); returns the next packet the server
        sends (a TOOL_CALL would be a failure: these examples call no client
        tool)."""
        self.sock.sendall(json.dumps(packet).encode() + b"\n")
        line = self.reader.readline()
        check(line, f"the server closed the connection after {json.dumps(packet)}")
        return json.loads(line)

    def close(self):
        self.reader.close()
        self.sock.close()


def expect_type(answer, want, sent):
    check(answer.get("type") == want,
          f"sent {json.dumps(sent)}; answered {json.dumps(answer)}; expected a {want} packet")


# The spec's example result: "Thu Feb 20 20:30:05 CET 2025" (date(1)).
DATE = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [A-Z]+ \d{4}$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/tempora")
    args = ap.parse_args()

    base = example("neurodock_packet.jsonc")

    def add_tool(file):
        def go():
            packet = copy.deepcopy(base)
            packet["data"] = example(file)
            answer = conn.ask(packet)
            expect_type(answer, "TOOL_ADDED", packet)
            name = packet["data"]["name"]
            check(answer["data"].get("name") == name, f"TOOL_ADDED names {answer['data'].get('name')!r}, not {name!r}")
        return go

    def query(file, then=None):
        def go():
            packet = example(file)
            answer = conn.ask(packet)
            expect_type(answer, "RESPONSE", packet)
            check(isinstance(answer["data"].get("message"), str) and answer["data"]["message"],
                  f"RESPONSE without a message: {json.dumps(answer)}")
            return then(answer) if then else None
        return go

    def has_the_date(answer):
        shape = example("neurodock_tool_result.jsonc")
        data = answer["data"]
        tools = data.get("tools")
        check(isinstance(tools, list) and len(tools) == 1, f"RESPONSE tools: {json.dumps(tools)}")
        got = tools[0]
        check(set(got) == set(shape) and got.get("tool") == shape["tool"],
              f"tool result {json.dumps(got)} is not shaped like the spec's {json.dumps(shape)}")
        check(isinstance(got["result"], str) and DATE.match(got["result"]),
              f"get_current_date gave {got['result']!r}, not a date like {shape['result']!r}")
        query_text = data.get("query") or ""
        check(query_text == "This is the current data " + json.dumps(got, separators=(",", ":")),
              f"%0 was not replaced by the result: query {query_text!r}")
        return f"%0 -> {json.dumps(got, separators=(',', ':'))}"

    with serve(args.bin, tcp=True, http=False) as srv:
        conn = Connection(srv.tcp)
        try:
            run("neurodock ADD_TOOL a_tool_name (spec's tool json)", add_tool("neurodock_tool_a_tool_name.jsonc"))
            run("neurodock ADD_TOOL get_current_date (spec's definition of the built-in)",
                add_tool("neurodock_tool_get_current_date.jsonc"))
            run("neurodock QUERY {\"message\": \"The query\"}", query("neurodock_query.jsonc"))
            run("neurodock QUERY with \"tools\": []", query("neurodock_query_tools.jsonc"))
            run("neurodock QUERY \"This is the current data %0\" with get_current_date",
                query("neurodock_query_current_date.jsonc", has_the_date))
        finally:
            conn.close()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
