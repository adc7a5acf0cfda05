"""neuro-san's gRPC API driven by grpcio (PyPI `grpcio`), with Python stubs
generated from the project's own proto/ by grpcio-tools.

Run by scripts/neurosan-grpc.sh:

    python tests/python/neurosan_grpc_client_test.py --bin target/debug/tempora --stubs DIR

DIR holds the modules `python -m grpc_tools.protoc` generated. The test
starts `tempora serve` (free ports, temporary data directory, the fixture
agent networks of tests/data/agents/good) and reads the gRPC address from
its log. Generated stubs call the fixed package path, but the server routes
the agent service by agent name, so the calls go through
`channel.unary_unary('/memory.AgentService/Function', ...)` and
`channel.unary_stream(...)` with the generated message classes. Each case
reports on its own; exits non-zero if any failed, after a line
"N passed, N failed".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

import grpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENTS = os.path.join(ROOT, "tests", "data", "agents", "good")
LIST = "/dev.cognizant_ai.neuro_san.api.grpc.concierge.ConciergeService/List"
NAS_KEY = "nas-key-1"
ADMIN = "adm-secret-1"

passed = 0
failed = 0


def check(cond: bool, what: str) -> None:
    global passed
    if not cond:
        raise AssertionError(what)
    passed += 1


@contextlib.contextmanager
def serve(binary: str, env: dict[str, str]):
    """A running server; yields (grpc address, http base URL)."""
    with tempfile.TemporaryDirectory(prefix="tempora-grpc-") as tmp:
        full = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORA_")}
        full.update(env)
        full.update({"TEMPORA_LOG": "info", "NO_COLOR": "1", "TEMPORA_AGENTS_DIR": AGENTS})
        log_path = os.path.join(tmp, "server.log")
        log = open(log_path, "wb")
        proc = subprocess.Popen(
            [binary, "serve", "--data-dir", os.path.join(tmp, "data"), "--http-addr", "127.0.0.1:0",
             "--grpc-addr", "127.0.0.1:0", "--tcp-addr", "off"],
            env=full, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.time() + 30
            addrs: dict[str, str] = {}
            while len(addrs) < 2:
                with open(log_path, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        for what in ("http", "grpc"):
                            marker = f"{what} listening on "
                            if marker in line:
                                addrs[what] = line.split(marker, 1)[1].split()[0]
                if len(addrs) < 2:
                    if proc.poll() is not None or time.time() > deadline:
                        raise RuntimeError("tempora did not report its addresses:\n" + open(log_path).read())
                    time.sleep(0.05)
            yield addrs["grpc"], "http://" + addrs["http"]
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


class Client:
    """The name-routed calls, with the generated message classes."""

    def __init__(self, channel: grpc.Channel, key: str | None = None, tenant: str | None = None):
        from neuro_san.api.grpc import agent_pb2, concierge_pb2

        self.agent_pb2 = agent_pb2
        self.concierge_pb2 = concierge_pb2
        self.channel = channel
        self.metadata = []
        if key:
            self.metadata.append(("authorization", f"Bearer {key}"))
        if tenant:
            self.metadata.append(("x-tempora-tenant", tenant))

    def list(self):
        call = self.channel.unary_unary(
            LIST,
            request_serializer=self.concierge_pb2.ConciergeRequest.SerializeToString,
            response_deserializer=self.concierge_pb2.ConciergeResponse.FromString,
        )
        return call(self.concierge_pb2.ConciergeRequest(), metadata=self.metadata, timeout=30)

    def function(self, agent: str):
        call = self.channel.unary_unary(
            f"/{agent}.AgentService/Function",
            request_serializer=self.agent_pb2.FunctionRequest.SerializeToString,
            response_deserializer=self.agent_pb2.FunctionResponse.FromString,
        )
        return call(self.agent_pb2.FunctionRequest(), metadata=self.metadata, timeout=30)

    def connectivity(self, agent: str):
        call = self.channel.unary_unary(
            f"/{agent}.AgentService/Connectivity",
            request_serializer=self.agent_pb2.ConnectivityRequest.SerializeToString,
            response_deserializer=self.agent_pb2.ConnectivityResponse.FromString,
        )
        return call(self.agent_pb2.ConnectivityRequest(), metadata=self.metadata, timeout=30)

    def chat(self, agent: str, request) -> list:
        call = self.channel.unary_stream(
            f"/{agent}.AgentService/StreamingChat",
            request_serializer=self.agent_pb2.ChatRequest.SerializeToString,
            response_deserializer=self.agent_pb2.ChatResponse.FromString,
        )
        return list(call(request, metadata=self.metadata, timeout=60))

    def say(self, text: str, context=None, filter_type=None):
        from neuro_san.api.grpc import chat_pb2

        req = self.agent_pb2.ChatRequest(
            user_message=chat_pb2.ChatMessage(type=chat_pb2.ChatMessage.HUMAN, text=text))
        if context is not None:
            req.chat_context.CopyFrom(context)
        if filter_type is not None:
            req.chat_filter.chat_filter_type = filter_type
        return req


def http_json(url: str, key: str | None = None):
    req = urllib.request.Request(url)
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def code_of(fn) -> grpc.StatusCode | None:
    try:
        fn()
    except grpc.RpcError as e:
        return e.code()
    return None


def as_dict(msg) -> dict:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def descriptions(binary: str) -> None:
    with serve(binary, {}) as (addr, http):
        with grpc.insecure_channel(addr) as ch:
            c = Client(ch)
            listed = c.list()
            names = sorted(a.agent_name for a in listed.agents)
            check(names == ["hello", "memory", "music", "passthrough"], f"listed: {names}")
            check(as_dict(listed) == http_json(http + "/api/v1/list"), "List answers as GET /api/v1/list")
            for agent in ("memory", "deep/math_guy", "passthrough"):
                f = c.function(agent)
                check(f.function.description != "", f"{agent}: a description")
                check(as_dict(f) == http_json(f"{http}/api/v1/{agent}/function"), f"{agent}: Function as over HTTP")
                conn = c.connectivity(agent)
                check(as_dict(conn) == http_json(f"{http}/api/v1/{agent}/connectivity"),
                      f"{agent}: Connectivity as over HTTP")
            front = [i for i in c.connectivity("memory").connectivity_info if i.origin == "memory"][0]
            for tool in ("remember", "recall", "build_context", "history", "whats_changed"):
                check(tool in front.tools, f"{tool} in {list(front.tools)}")
            check(c.function("memory").function.HasField("parameters"), "memory takes parameters")


def unknown(binary: str) -> None:
    with serve(binary, {}) as (addr, _):
        with grpc.insecure_channel(addr) as ch:
            c = Client(ch)
            for agent in ("nobody", "deep/nobody"):
                for name, fn in (("Function", lambda: c.function(agent)),
                                 ("Connectivity", lambda: c.connectivity(agent)),
                                 ("StreamingChat", lambda: c.chat(agent, c.say("hi")))):
                    code = code_of(fn)
                    check(code == grpc.StatusCode.UNIMPLEMENTED, f"{agent} {name}: {code}")
            dance = ch.unary_unary("/memory.AgentService/Dance", request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=lambda b: b)
            code = code_of(lambda: dance(c.agent_pb2.FunctionRequest(), timeout=30))
            check(code == grpc.StatusCode.UNIMPLEMENTED, f"an unknown method: {code}")


def chat(binary: str) -> None:
    from neuro_san.api.grpc import agent_pb2, chat_pb2

    framework = chat_pb2.ChatMessage.AGENT_FRAMEWORK
    with serve(binary, {}) as (addr, _):
        with grpc.insecure_channel(addr) as ch:
            c = Client(ch)
            first = c.chat("memory", c.say("remember Person:sarah works_at Org:acme"))
            check(len(first) == 1, f"MINIMAL: one response, got {len(first)}")
            last = first[-1].response
            check(last.type == framework, f"the answer is AGENT_FRAMEWORK: {last.type}")
            check("Person:sarah works_at Org:acme" in last.text, f"remembered: {last.text!r}")
            check(len(last.chat_context.chat_histories) >= 1, "the answer carries a chat_context")

            second = c.chat("memory", c.say("what do you know about Person:sarah", last.chat_context,
                                            agent_pb2.MINIMAL))
            check(len(second) == 1, f"MINIMAL: one response, got {len(second)}")
            check("Org:acme" in second[-1].response.text, f"recalled: {second[-1].response.text!r}")

            every = c.chat("memory", c.say("what do you know about Person:sarah", None, agent_pb2.MAXIMAL))
            check(len(every) > 1, f"MAXIMAL: more than the answer, got {len(every)}")
            check(all(r.HasField("request") for r in every), "MAXIMAL: every response echoes the request")
            check(every[-1].response.type == framework, "MAXIMAL: the answer comes last")
            check(every[-1].response.HasField("chat_context"), "MAXIMAL: the answer carries a chat_context")


def keyed(binary: str) -> None:
    env = {"TEMPORA_TENANT_KEYS": "nas=nas-key-1,acme=acme-key-1", "TEMPORA_ADMIN_TOKENS": ADMIN}
    with serve(binary, env) as (addr, _):
        with grpc.insecure_channel(addr) as ch:
            anonymous = Client(ch)
            for name, fn in (("List", anonymous.list), ("Function", lambda: anonymous.function("memory"))):
                code = code_of(fn)
                check(code == grpc.StatusCode.UNAUTHENTICATED, f"{name} without a key: {code}")
            nas = Client(ch, NAS_KEY)
            check("memory" in [a.agent_name for a in nas.list().agents], "a tenant key lists")
            check(nas.function("memory").function.description != "", "a tenant key reads Function")
            code = code_of(lambda: Client(ch, ADMIN).chat("memory", nas.say("hi")))
            check(code == grpc.StatusCode.INVALID_ARGUMENT, f"an admin chat without a tenant: {code}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/tempora")
    ap.add_argument("--stubs", required=True, help="directory of the generated Python modules")
    args = ap.parse_args()
    sys.path.insert(0, args.stubs)
    print(f"grpcio {grpc.__version__} (python {sys.version.split()[0]})")
    global failed
    for name, case in (("List, Function, Connectivity", descriptions), ("unknown agents and methods", unknown),
                       ("StreamingChat", chat), ("keyed mode", keyed)):
        try:
            case(args.bin)
            print(f"  {name}: ok")
        except BaseException as e:  # report and go on to the next case
            failed += 1
            print(f"  {name}: FAILED: {type(e).__name__}: {e}")
            traceback.print_exc()
    print(f"neurosan grpc: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
