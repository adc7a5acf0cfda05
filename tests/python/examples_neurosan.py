"""neuro-san's own client usage, as the README of PyPI `neuro-san` shows it,
against tempora's built-in `memory` network (open mode).

- The CLI of "Client/Server Setup" -> "Client":
  `python -m neuro_san.client.agent_cli --http --agent hello_world`, with
  `--agent memory`: tempora is started on neuro-san's default port (8080 on
  localhost) when that port is free, so the command runs as written; else
  on a free port, given with `--port` (the only addition). A fact and then a
  question are typed on stdin, then `quit` (what the CLI's prompt says ends
  it); the CLI must answer both and exit 0 on its own.
- The library of "Infrastructure": AgentSession's function() and
  streaming_chat() through HttpServiceAgentSession
  (tests/examples/neurosan_library.py), which must describe `memory` and
  answer from what the CLI told it.

Each runs as its own process within EXAMPLE_SECONDS. Prints `ok <name>` /
`FAILED <name>: why`; exits 1 on any failure.

Usage: examples_neurosan.py --bin target/debug/tempora
"""

import argparse
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from examples_common import EXAMPLES, ExampleTimeout, check, finish, python, run, run_example, serve, tail  # noqa: E402

NEURO_SAN_PORT = 8080  # neuro-san's DEFAULT_HTTP_PORT
TYPED = [
    "remember Person:sarah works_at Org:acme",
    "what do you know about Person:sarah",
    "quit",
]


def port_args(srv):
    return [] if srv.http_port == NEURO_SAN_PORT else ["--port", str(srv.http_port)]


def cli(srv):
    cmd = [python(), "-m", "neuro_san.client.agent_cli", "--http", "--agent", "memory", *port_args(srv)]
    shown = "python -m neuro_san.client.agent_cli --http --agent memory" + "".join(" " + a for a in port_args(srv))
    with tempfile.TemporaryDirectory(prefix="neurosan-cli-") as tmp:
        env = {"USER": os.environ.get("USER") or "examples"}
        try:
            rc, out, err = run_example(cmd, cwd=tmp, stdin_text="\n".join(TYPED) + "\n", env=env)
        except ExampleTimeout as e:
            raise AssertionError(f"`{shown}`: {e}; output: {tail(e.stdout)}")
    check(rc == 0, f"`{shown}`: exit {rc}: {tail(err or out, 4)}")
    answers = out.split("Response from memory:")[1:]
    check(len(answers) == 2, f"`{shown}`: {len(answers)} answers to 2 messages: {tail(out)}")
    check("Remembered" in answers[0], f"first answer: {answers[0].strip()!r}")
    check("Org:acme" in answers[1], f"the question's answer does not name Org:acme: {answers[1].strip()!r}")
    return f"`{shown}`, typed {TYPED}: answered both, exited 0"


def library(srv):
    args = [] if srv.http_port == NEURO_SAN_PORT else [str(srv.http_port)]
    with tempfile.TemporaryDirectory(prefix="neurosan-lib-") as tmp:
        try:
            rc, out, err = run_example([python(), os.path.join(EXAMPLES, "neurosan_library.py"), *args], cwd=tmp)
        except ExampleTimeout as e:
            raise AssertionError(f"{e}; output: {tail(e.stdout)}")
    check(rc == 0, f"exit {rc}: {tail(err or out, 4)}")
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    check(len(lines) >= 2, f"output: {tail(out)}")
    function = lines[0].get("function")
    check(isinstance(function, dict) and function.get("description"), f"function(): {json.dumps(lines[0])}")
    last = lines[-1].get("response") or {}
    check(last.get("type") == "AGENT_FRAMEWORK", f"streaming_chat()'s last message: {json.dumps(lines[-1])[:400]}")
    check("Org:acme" in (last.get("text") or ""), f"streaming_chat() answered {last.get('text')!r}")
    return "function() describes memory; streaming_chat() answers from memory"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/tempora")
    args = ap.parse_args()
    with serve(args.bin, prefer_http_port=NEURO_SAN_PORT) as srv:
        run("neuro-san agent_cli --http --agent memory (README's client)", lambda: cli(srv))
        run("neuro-san HttpServiceAgentSession function() and streaming_chat() (README's library)",
            lambda: library(srv))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
