"""tempora's NeuroSan HTTP API driven by neuro-san's own client (PyPI `neuro-san`, 0.6.x).

Run by scripts/neurosan-clients.sh in its venv:

    python tests/python/neurosan_client_test.py --bin target/debug/tempora

It starts the real `tempora serve` (port 0, the bound address read from the
log line "http listening on ...", a temporary data directory, an agents
directory copied from tests/data/agents/good plus a public network with a `/`
in its name) and talks to it only through the library's public client API:
`ConciergeSessionFactory` (list), `AgentSessionFactory().create_session("http",
...)` (function, connectivity, streaming_chat), `StreamingInputProcessor`
(how the library builds a chat request) and `BasicMessageProcessor` (how it
reads the answer, chat_context and sly_data back), plus the user-facing CLI
`python -m neuro_san.client.agent_cli`. A second server runs in keyed mode
(tenants from a config file), the key passed as the session's metadata.

Prints one line per check and a summary "N passed, N failed"; exits 1 on
any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from importlib.metadata import version as pkg_version
from typing import Any, Callable

import requests

from neuro_san.client.agent_session_factory import AgentSessionFactory
from neuro_san.client.concierge_session_factory import ConciergeSessionFactory
from neuro_san.client.streaming_input_processor import StreamingInputProcessor
from neuro_san.message.processors.basic_message_processor import BasicMessageProcessor
from neuro_san.message.types.chat_message_type import ChatMessageType

NEURO_SAN_VERSION = pkg_version("neuro-san")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOOD_AGENTS = os.path.join(REPO, "tests", "data", "agents", "good")

SLASH_NETWORK = "team/notes"
MEMORY_TOOLS = {"remember", "recall", "build_context", "history", "whats_changed"}
REMEMBER = "remember Person:sarah works_at Org:acme"
FACT = "Person:sarah works_at Org:acme"
ASK = "what do you know about Person:sarah"
KEY_A = "tenant-a-key-1"
KEY_B = "tenant-b-key-1"
CHECK_SECONDS = 90

# The extra network: public, with a `/` in its name, calling the built-in memory.
NOTES_HOCON = """
{
    "metadata": {
        "description": "Keeps a team's notes in memory.",
        "tags": ["example", "notes"]
    },
    "tools": [
        {
            "name": "notes",
            "function": {
                "description": "I keep the team's notes.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "note": { "type": "string", "description": "The note, in words" }
                    },
                    "required": ["note"]
                }
            },
            "instructions": "Store each note with /memory and say what you stored.",
            "tools": ["/memory"]
        }
    ]
}
"""

MANIFEST = """
{
    "hello.hocon": true,
    "music.hocon": true,
    "deep/math_guy.hocon": { "serve": true, "public": false },
    "passthrough.hocon": true,
    "team/notes.hocon": true
}
"""

KEYED_CONFIG = f"""
[auth]
[[auth.tenants]]
name = "tenant-a"
keys = ["{KEY_A}"]
[[auth.tenants]]
name = "tenant-b"
keys = ["{KEY_B}"]
"""

results: list[tuple[str, bool]] = []


class CheckTimeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise CheckTimeout(f"no answer within {CHECK_SECONDS}s")


def run(name: str, fn: Callable[[], None]) -> None:
    """Runs one check; prints `ok` or `FAIL` with the reason, and goes on."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CHECK_SECONDS)
    try:
        fn()
        results.append((name, True))
        print(f"  ok    {name}", flush=True)
    except Exception as e:  # report and go on to the next check
        results.append((name, False))
        if isinstance(e, ValueError) and e.__cause__ is not None:
            # The library's ValueError carries a generic help text; the cause says what happened.
            e = e.__cause__
        print(f"  FAIL  {name}: {type(e).__name__}: {e}", flush=True)
        if os.environ.get("NEUROSAN_TEST_TRACE"):
            traceback.print_exc()
    finally:
        signal.alarm(0)


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


# --- the server ----------------------------------------------------------------

class Server:
    def __init__(self, host: str, port: int, log: str):
        self.host = host
        self.port = port
        self.log = log


@contextlib.contextmanager
def serve(binary: str, agents_dir: str, config_text: str | None = None):
    """`tempora serve` on 127.0.0.1:0; yields the bound host and port."""
    with tempfile.TemporaryDirectory(prefix="tempora-neurosan-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORA_")}
        env.update({"TEMPORA_LOG": "info", "NO_COLOR": "1", "TEMPORA_AGENTS_DIR": agents_dir})
        cmd = [binary, "serve", "--data-dir", os.path.join(tmp, "data"), "--http-addr", "127.0.0.1:0",
               "--grpc-addr", "off", "--tcp-addr", "off"]
        if config_text is not None:
            cfg = os.path.join(tmp, "tempora.toml")
            with open(cfg, "w") as f:
                f.write(config_text)
            cmd += ["--config", cfg]
        log_path = os.path.join(tmp, "server.log")
        log = open(log_path, "wb")
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 60
            addr = None
            while addr is None:
                with open(log_path, encoding="utf-8", errors="replace") as f:
                    m = re.search(r"http listening on (\d+\.\d+\.\d+\.\d+):(\d+)", f.read())
                if m:
                    addr = (m.group(1), int(m.group(2)))
                elif proc.poll() is not None or time.time() > deadline:
                    with open(log_path, encoding="utf-8", errors="replace") as f:
                        raise RuntimeError("tempora did not start: " + f.read())
                else:
                    time.sleep(0.1)
            yield Server(addr[0], addr[1], log_path)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def agents_dir(tmp: str) -> str:
    """tests/data/agents/good, plus the public network team/notes."""
    d = os.path.join(tmp, "agents")
    shutil.copytree(GOOD_AGENTS, d)
    os.makedirs(os.path.join(d, "team"), exist_ok=True)
    with open(os.path.join(d, "team", "notes.hocon"), "w") as f:
        f.write(NOTES_HOCON)
    with open(os.path.join(d, "manifest.hocon"), "w") as f:
        f.write(MANIFEST)
    return d


# --- the library ---------------------------------------------------------------

def session(srv: Server, agent: str, key: str | None = None):
    metadata = {"Authorization": f"Bearer {key}"} if key else None
    return AgentSessionFactory().create_session("http", agent, srv.host, srv.port, metadata=metadata,
                                                connect_timeout_in_seconds=30)


def concierge(srv: Server, key: str | None = None):
    metadata = {"Authorization": f"Bearer {key}"} if key else None
    return ConciergeSessionFactory().create_session("http", hostname=srv.host, port=srv.port, metadata=metadata,
                                                    connect_timeout_in_seconds=30)


class Reply:
    """One streaming_chat call: the raw responses, and what the library's
    BasicMessageProcessor makes of them."""

    def __init__(self, responses: list[dict[str, Any]]):
        self.responses = responses
        self.processor = BasicMessageProcessor()
        for r in responses:
            self.processor.process_message(r.get("response", {}))

    @property
    def last(self) -> dict[str, Any]:
        expect(len(self.responses) > 0, "no response streamed")
        return self.responses[-1].get("response", {})

    @property
    def answer(self) -> str:
        return self.processor.get_answer() or ""

    def __repr__(self) -> str:
        return f"{len(self.responses)} responses, last {self.responses[-1] if self.responses else None}"


def chat(srv: Server, agent: str, text: str, *, key: str | None = None, chat_context=None, chat_filter=None,
         sly_data=None) -> Reply:
    s = session(srv, agent, key)
    request = StreamingInputProcessor(session=s).formulate_chat_request(
        text, sly_data=sly_data, chat_context=chat_context, chat_filter=chat_filter)
    return Reply(list(s.streaming_chat(request)))


def http_status_of(e: BaseException) -> int | None:
    """The library wraps HTTP failures in a ValueError (a help text) raised
    from requests' HTTPError: the status is on the cause."""
    cause = e.__cause__
    if isinstance(cause, requests.HTTPError) and cause.response is not None:
        return cause.response.status_code
    return None


def chat_refused(srv: Server, agent: str, text: str, key: str | None = None) -> int | None:
    try:
        r = chat(srv, agent, text, key=key)
    except ValueError as e:
        return http_status_of(e)
    raise AssertionError(f"expected an error, got {r}")


def said(chat_context: dict[str, Any]) -> list[str]:
    """The texts of the conversation's messages, without the system prompt
    (the memory front man's instructions carry an example fact)."""
    return [m.get("text") or "" for h in chat_context.get("chat_histories", []) for m in h.get("messages", [])
            if m.get("type") != "SYSTEM"]


# --- the checks ----------------------------------------------------------------

def check_list(srv: Server) -> None:
    resp = concierge(srv).list({})
    agents = {a["agent_name"]: a for a in resp.get("agents", [])}
    expect("memory" in agents, f"memory not listed: {resp}")
    expect(SLASH_NETWORK in agents, f"{SLASH_NETWORK} not listed: {sorted(agents)}")
    expect("hello" in agents and "passthrough" in agents, f"hello/passthrough not listed: {sorted(agents)}")
    expect("deep/math_guy" not in agents, "deep/math_guy is public = false and must not be listed")
    for name, a in agents.items():
        expect(isinstance(a.get("description"), str) and a["description"].strip(), f"{name}: no description: {a}")
    expect(agents[SLASH_NETWORK]["description"] == "Keeps a team's notes in memory.",
           f"{SLASH_NETWORK} description: {agents[SLASH_NETWORK]}")
    expect(agents[SLASH_NETWORK].get("tags") == ["example", "notes"], f"{SLASH_NETWORK} tags: {agents[SLASH_NETWORK]}")


def check_function_memory(srv: Server) -> None:
    resp = session(srv, "memory").function({})
    fn = resp.get("function")
    expect(isinstance(fn, dict), f"no function: {resp}")
    expect(isinstance(fn.get("description"), str) and len(fn["description"]) > 10, f"description: {fn}")
    props = (fn.get("parameters") or {}).get("properties", {})
    expect("inquiry" in props, f"memory's front man takes an inquiry: {fn}")


def check_connectivity_memory(srv: Server) -> None:
    resp = session(srv, "memory").connectivity({})
    infos = {c["origin"]: c for c in resp.get("connectivity_info", [])}
    expect("memory" in infos, f"no front man 'memory': {resp}")
    tools = set(infos["memory"].get("tools", []))
    expect(MEMORY_TOOLS <= tools, f"front man tools {sorted(tools)} lack {sorted(MEMORY_TOOLS - tools)}")


def check_function_slash(srv: Server) -> None:
    resp = session(srv, SLASH_NETWORK).function({})
    fn = resp.get("function", {})
    expect(fn.get("description") == "I keep the team's notes.", f"function: {resp}")
    expect(fn.get("parameters", {}).get("required") == ["note"], f"parameters: {fn}")


def check_connectivity_slash(srv: Server) -> None:
    resp = session(srv, SLASH_NETWORK).connectivity({})
    infos = {c["origin"]: c for c in resp.get("connectivity_info", [])}
    expect(infos.get("notes", {}).get("tools") == ["/memory"], f"connectivity: {resp}")
    expect(resp.get("metadata", {}).get("tags") == ["example", "notes"], f"metadata: {resp.get('metadata')}")


def check_unlisted_served(srv: Server) -> None:
    fn = session(srv, "deep/math_guy").function({}).get("function", {})
    expect("secret numbers" in fn.get("description", ""), f"deep/math_guy function: {fn}")
    expect("x" in fn.get("sly_data_schema", {}).get("properties", {}), f"sly_data_schema: {fn}")


def check_unknown_agent_describe(srv: Server) -> None:
    # function()/connectivity() do not look at the status: they hand back the
    # decoded body, here the server's 404 error, and no "function".
    for call in ("function", "connectivity"):
        resp = getattr(session(srv, "no/such_agent"), call)({})
        expect("function" not in resp and "connectivity_info" not in resp, f"{call}: {resp}")
        expect("error" in resp, f"{call}: expected the 404 error body, got {resp}")


def check_unknown_agent_chat(srv: Server) -> None:
    status = chat_refused(srv, "no/such_agent", "hello")
    expect(status == 404, f"streaming_chat to an unknown agent: HTTP {status}, expected 404")


def two_turns(srv: Server, chat_filter: dict[str, Any] | None, key: str | None = None) -> None:
    maximal = bool(chat_filter) and chat_filter.get("chat_filter_type") == "MAXIMAL"
    ctx = None
    for turn, text, want in ((1, REMEMBER, FACT), (2, ASK, "Org:acme")):
        reply = chat(srv, "memory", text, key=key, chat_context=ctx, chat_filter=chat_filter)
        last = reply.last
        if maximal:
            expect(len(reply.responses) > 1, f"turn {turn}: MAXIMAL streams more than the answer: {reply}")
            for r in reply.responses:
                expect(isinstance(r.get("request"), dict), f"turn {turn}: MAXIMAL response without request: {r}")
                expect(r["request"].get("user_message", {}).get("text") == text,
                       f"turn {turn}: the request echoed is not ours: {r['request']}")
        else:
            expect(len(reply.responses) == 1, f"turn {turn}: MINIMAL streams only the answer: {reply}")
            expect("request" not in reply.responses[0], f"turn {turn}: MINIMAL adds no request: {reply}")
        for r in reply.responses:
            t = r.get("response", {}).get("type")
            # On the HTTP wire the library sees the enum's name, a string.
            expect(isinstance(t, str) and t in ChatMessageType.__members__, f"turn {turn}: message type {t!r}")
        expect(last.get("type") == "AGENT_FRAMEWORK", f"turn {turn}: last message type {last.get('type')!r}")
        expect(ChatMessageType.from_response_type(last["type"]) == ChatMessageType.AGENT_FRAMEWORK, "type")
        expect(want in (last.get("text") or ""), f"turn {turn}: {want!r} not in {last.get('text')!r}")
        expect(want in reply.answer, f"turn {turn}: the library's answer {reply.answer!r} lacks {want!r}")
        cc = last.get("chat_context")
        expect(isinstance(cc, dict) and isinstance(cc.get("chat_histories"), list) and cc["chat_histories"],
               f"turn {turn}: no chat_context.chat_histories: {last}")
        expect(reply.processor.get_chat_context() == cc, f"turn {turn}: the library did not pick up chat_context")
        if turn == 2:
            expect(REMEMBER in said(cc), f"turn 2: the history lost turn 1: {said(cc)}")
        ctx = reply.processor.get_chat_context()


def check_sly_data(srv: Server) -> None:
    for chat_filter in (None, {"chat_filter_type": "MAXIMAL"}):
        reply = chat(srv, "memory", ASK, sly_data={"secret": "x"}, chat_filter=chat_filter)
        expect(reply.last.get("type") == "AGENT_FRAMEWORK", f"answered: {reply}")
        for r in reply.responses:
            sly = r.get("response", {}).get("sly_data")
            expect(not sly or "secret" not in sly, f"sly_data came back: {sly}")
            # MAXIMAL echoes the request: not its sly_data.
            expect("secret" not in (r.get("request") or {}).get("sly_data", {}), f"echoed: {r.get('request')}")
        sly = reply.processor.get_sly_data()
        expect(not sly or "secret" not in sly, f"the library sees sly_data {sly}")


def cli(srv: Server, *args: str, prompt: str | None = None) -> str:
    with tempfile.TemporaryDirectory(prefix="neurosan-cli-") as tmp:
        cmd = [sys.executable, "-m", "neuro_san.client.agent_cli", "--http", "--host", srv.host,
               "--port", str(srv.port), "--timeout", "30", *args]
        if prompt is not None:
            path = os.path.join(tmp, "prompt.txt")
            with open(path, "w") as f:
                f.write(prompt)
            cmd += ["--first_prompt_file", path, "--one_shot", "--no_thinking_file"]
        env = dict(os.environ, USER=os.environ.get("USER") or "tester")
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CHECK_SECONDS - 10,
                           cwd=tmp, env=env)
        errors = [line for line in p.stderr.splitlines() if re.match(r"^[\w.]+(Error|Exception): \S", line)]
        tail = " | ".join(errors[-2:] or (p.stdout + p.stderr).strip().splitlines()[-3:])
        expect(p.returncode == 0, f"{' '.join(args)}: exit {p.returncode}: ... {tail}")
        return p.stdout


def check_cli_list(srv: Server) -> None:
    out = cli(srv, "--list")
    expect(f'"{SLASH_NETWORK}"' in out and '"memory"' in out, f"--list output: {out}")


def check_cli_connectivity(srv: Server) -> None:
    out = cli(srv, "--agent", "memory", "--connectivity")
    expect(all(f'"{t}"' in out for t in MEMORY_TOOLS), f"--connectivity output: {out}")


def check_cli_chat(srv: Server) -> None:
    out = cli(srv, "--agent", "memory", prompt=ASK)
    expect("Response from" in out and "Org:acme" in out, f"agent_cli output: {out}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/tempora")
    args = ap.parse_args()
    print(f"neuro-san {NEURO_SAN_VERSION} (python {sys.version.split()[0]})", flush=True)

    with tempfile.TemporaryDirectory(prefix="neurosan-agents-") as tmp:
        agents = agents_dir(tmp)

        print("open mode, MINIMAL", flush=True)
        with serve(args.bin, agents) as srv:
            run("list: memory and team/notes, with descriptions", lambda: check_list(srv))
            run("function of memory", lambda: check_function_memory(srv))
            run("connectivity of memory: the five memory tools", lambda: check_connectivity_memory(srv))
            run("function of team/notes", lambda: check_function_slash(srv))
            run("connectivity of team/notes", lambda: check_connectivity_slash(srv))
            run("function of unlisted deep/math_guy", lambda: check_unlisted_served(srv))
            run("unknown agent: function/connectivity give the 404 body", lambda: check_unknown_agent_describe(srv))
            run("unknown agent: streaming_chat raises (HTTP 404)", lambda: check_unknown_agent_chat(srv))
            run("chat MINIMAL: remember, then ask through chat_context", lambda: two_turns(srv, None))
            run("sly_data: secret does not come back (MINIMAL, MAXIMAL)", lambda: check_sly_data(srv))
            run("agent_cli --list", lambda: check_cli_list(srv))
            run("agent_cli --connectivity", lambda: check_cli_connectivity(srv))
            run("agent_cli one-shot chat", lambda: check_cli_chat(srv))

        print("open mode, MAXIMAL", flush=True)
        with serve(args.bin, agents) as srv:
            run("chat MAXIMAL: remember, then ask through chat_context",
                lambda: two_turns(srv, {"chat_filter_type": "MAXIMAL"}))

        print("keyed mode", flush=True)
        with serve(args.bin, agents, KEYED_CONFIG) as srv:
            keyed_checks(srv)

    failed = sum(1 for _, ok in results if not ok)
    print(f"neuro-san {NEURO_SAN_VERSION}: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def keyed_checks(srv: Server) -> None:
    def list_needs_key() -> None:
        resp = concierge(srv).list({})
        expect("agents" not in resp, f"listed without a key: {resp}")
        resp = concierge(srv, KEY_A).list({})
        expect("memory" in {a["agent_name"] for a in resp.get("agents", [])}, f"list with a key: {resp}")

    def function_needs_key() -> None:
        resp = session(srv, "memory").function({})
        expect("function" not in resp, f"function without a key: {resp}")
        resp = session(srv, "memory", KEY_A).function({})
        expect("function" in resp, f"function with a key: {resp}")

    def chat_needs_key() -> None:
        status = chat_refused(srv, "memory", ASK)
        expect(status == 404, f"streaming_chat without a key: HTTP {status}, expected 404")
        status = chat_refused(srv, "memory", ASK, key="not-a-key-at-all")
        expect(status == 404, f"streaming_chat with a wrong key: HTTP {status}, expected 404")

    def tenants_apart() -> None:
        two_turns(srv, None, key=KEY_A)
        reply = chat(srv, "memory", ASK, key=KEY_B)
        expect(reply.last.get("type") == "AGENT_FRAMEWORK", f"tenant B answered: {reply}")
        expect("Org:acme" not in (reply.last.get("text") or ""), f"tenant B sees tenant A's fact: {reply.last}")
        heard = said(reply.last.get("chat_context") or {})
        expect(heard and not any("Org:acme" in t for t in heard), f"B's conversation: {heard}")

    run("keyed: list needs the key", list_needs_key)
    run("keyed: function needs the key", function_needs_key)
    run("keyed: streaming_chat without the key is refused (HTTP 404)", chat_needs_key)
    run("keyed: tenant A remembers and recalls; tenant B does not see it", tenants_apart)


if __name__ == "__main__":
    sys.exit(main())
