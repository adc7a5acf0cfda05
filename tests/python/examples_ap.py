"""The Agent Protocol Python client's minimal example
(tests/examples/agent_protocol_minimal.py: packages/client/python/examples/
minimal.py of the agent-protocol repository, byte for byte) run as its own
process against the real `tempora serve` (open mode).

The example talks to http://localhost:8000: tempora is started on
127.0.0.1:8000 when that port is free, and the example runs as it is;
otherwise tempora takes a free port and the example runs from a copy in
which that one address is replaced. It needs PyPI `agent-protocol-client`
and `agent-protocol` (its first import), pinned by scripts/examples.sh.

The example must print "Agent finished its work!" and exit 0 within
EXAMPLE_SECONDS, after a bounded number of steps: counted from its output
and by listing the task's steps over HTTP afterwards.

Prints `ok <name>` / `FAILED <name>: why`; exits 1 on any failure.

Usage: examples_ap.py --bin target/debug/tempora
"""

import argparse
import json
import os
import re
import sys
import tempfile
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from examples_common import ExampleTimeout, check, example_source, finish, python, run, run_example, serve, tail  # noqa: E402

EXAMPLE = "agent_protocol_minimal.py"
WRITTEN_FOR = "http://localhost:8000"
# The task's input is one line; a task that has not ended after this many
# steps is looping.
MAX_STEPS = 10
STEP_MARK = "The response of AgentApi->execute_agent_task_step:"


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def steps_of(base, task_id):
    got = get(f"{base}/ap/v1/agent/tasks/{task_id}/steps?page_size=100")
    return got["pagination"]["total_items"], got["steps"]


def minimal(srv):
    with tempfile.TemporaryDirectory(prefix="ap-example-") as tmp:
        verbatim = srv.http_port == 8000
        path, how = example_source(EXAMPLE, tmp, written_for=WRITTEN_FOR, base=None if verbatim else srv.base)
        try:
            rc, out, err = run_example([python(), path], cwd=tmp)
        except ExampleTimeout as e:
            printed = e.stdout.count(STEP_MARK)
            tasks = get(f"{srv.base}/ap/v1/agent/tasks?page_size=100")["tasks"]
            counts = [steps_of(srv.base, t["task_id"])[0] for t in tasks]
            raise AssertionError(f"{e} ({how}): it printed {printed} steps; the server holds {len(tasks)} task(s) "
                                 f"with {counts} step(s): the loop did not end (no step came back with "
                                 f"is_last true); last output: {tail(e.stdout, 3)}")
        check(rc == 0, f"exit {rc} ({how}): {tail(err or out)}")
        lines = [line for line in out.splitlines() if line.strip()]
        check(lines and lines[-1] == "Agent finished its work!", f"last line {lines[-1:]!r}, output: {tail(out)}")
        m = re.search(r"task_id='([0-9a-f-]+)'", out)
        check(m, f"no task_id in the printed task: {tail(out)}")
        task_id = m.group(1)
        printed = out.count(STEP_MARK)
        total, steps = steps_of(srv.base, task_id)
        # The example prints every step but the last (the loop ends on it).
        check(total == printed + 1, f"the server lists {total} steps, the example printed {printed} + the last")
        check(total <= MAX_STEPS, f"{total} steps for a one-line task (more than {MAX_STEPS})")
        check(steps[-1]["is_last"] is True, f"the last listed step is not is_last: {json.dumps(steps[-1])}")
        inputs = [s["input"] for s in steps]
        check(inputs == [str(i) for i in range(1, total + 1)], f"step inputs {inputs}, expected '1'..'{total}'")
        return f"{how}; {total} step(s), the last is_last, then \"Agent finished its work!\""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/tempora")
    args = ap.parse_args()
    with serve(args.bin, prefer_http_port=8000) as srv:
        run("agent-protocol minimal.py (official Python client example)", lambda: minimal(srv))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
