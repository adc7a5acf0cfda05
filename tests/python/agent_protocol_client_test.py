"""The Agent Protocol at /ap/v1 driven by the official Python client (PyPI
`agent-protocol-client`, pinned by scripts/agent-protocol-client.sh).

Starts the real `tempora serve` (port 0, read from the log line "http
listening on ...", a temporary data directory) and talks to it only through
the client's `AgentApi`: a task driven through all its steps (is_last, a
step after the last), artifacts uploaded and downloaded (bytes compared,
one larger than a stored chunk, an agent-created one), pagination of tasks,
steps and artifacts with its edges, the 404 and 422 shapes, and the server
restarted (SIGKILL) in the middle of a task, which then goes on.

Usage: agent_protocol_client_test.py --bin target/debug/tempora
"""

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

from agent_protocol_client import AgentApi, ApiClient, Configuration, StepRequestBody, TaskRequestBody
from agent_protocol_client.exceptions import ApiException


class Server:
    def __init__(self, binary, data_dir, log_path):
        env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORA_")}
        env.update({"TEMPORA_LOG": "info", "NO_COLOR": "1"})
        cmd = [binary, "serve", "--data-dir", data_dir, "--http-addr", "127.0.0.1:0",
               "--grpc-addr", "off", "--tcp-addr", "off"]
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            with open(log_path) as f:
                m = re.search(r"http listening on (\d+\.\d+\.\d+\.\d+):(\d+)", f.read())
            if m:
                self.base = f"http://{m.group(1)}:{m.group(2)}"
                return
            if self.proc.poll() is not None or time.time() > deadline:
                self.kill()
                raise RuntimeError("server did not start:\n" + open(log_path).read())
            time.sleep(0.05)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=15)
        self.log.close()


def check(cond, what):
    if not cond:
        raise AssertionError(what)


async def expect_error(coro, status, what):
    try:
        await coro
    except ApiException as e:
        check(e.status == status, f"{what}: status {e.status}, expected {status}; body {e.body!r}")
        body = json.loads(e.body)
        check(isinstance(body, dict), f"{what}: body is not an object: {e.body!r}")
        if status == 404:
            check(set(body) == {"message"} and body["message"], f"{what}: 404 body {body}")
        return body
    raise AssertionError(f"{what}: no error, expected {status}")


def api_of(server):
    client = ApiClient(Configuration(host=server.base))
    return client, AgentApi(client)


PLAN = "\n".join([
    "remember Person:sarah works_at Org:acme",
    "remember Person:sarah lives_in City:paris",
    "what do you know about Person:sarah",
])


async def drive_a_task(api, tmp):
    task = await api.create_agent_task(task_request_body=TaskRequestBody(input=PLAN, additional_input={"k": "v"}))
    check(task.input == PLAN and task.artifacts == [] and task.additional_input == {"k": "v"}, f"task {task}")
    tid = task.task_id
    got = await api.get_agent_task(task_id=tid)
    check(got.task_id == tid and got.input == PLAN, f"get task {got}")

    s1 = await api.execute_agent_task_step(task_id=tid, step_request_body=StepRequestBody())
    check(s1.status == "completed" and not s1.is_last and "Remembered" in (s1.output or ""), f"step 1 {s1}")
    # No body at all is a valid step too.
    s2 = await api.execute_agent_task_step(task_id=tid)
    check(not s2.is_last and "Remembered" in (s2.output or ""), f"step 2 {s2}")

    # Upload two artifacts: one small with a relative path, one larger than a stored chunk.
    small = os.path.join(tmp, "notes.txt")
    with open(small, "wb") as f:
        f.write(b"hello from the client\n")
    big_bytes = os.urandom(200_001)
    big = os.path.join(tmp, "big.bin")
    with open(big, "wb") as f:
        f.write(big_bytes)
    a1 = await api.upload_agent_task_artifacts(task_id=tid, file=small, relative_path="docs/in")
    check(a1.file_name == "notes.txt" and a1.relative_path == "docs/in" and not a1.agent_created, f"upload {a1}")
    a2 = await api.upload_agent_task_artifacts(task_id=tid, file=big)
    data = await api.download_agent_task_artifact(task_id=tid, artifact_id=a1.artifact_id)
    check(bytes(data) == b"hello from the client\n", f"small download {bytes(data)[:60]!r}")
    data = await api.download_agent_task_artifact(task_id=tid, artifact_id=a2.artifact_id)
    check(bytes(data) == big_bytes, f"big download: {len(data)} bytes")

    # The last line: is_last, with its answer saved as an artifact.
    s3 = await api.execute_agent_task_step(
        task_id=tid, step_request_body=StepRequestBody(additional_input={"save_as": "answer.md"}))
    check(s3.is_last, f"step 3 is last: {s3}")
    check("Org:acme" in s3.output and "City:paris" in s3.output, f"step 3 output {s3.output!r}")
    check(len(s3.artifacts) == 1 and s3.artifacts[0].agent_created, f"step 3 artifacts {s3.artifacts}")
    data = await api.download_agent_task_artifact(task_id=tid, artifact_id=s3.artifacts[0].artifact_id)
    check(bytes(data) == s3.output.encode(), "agent-created artifact holds the answer")

    after = await api.execute_agent_task_step(task_id=tid, step_request_body=StepRequestBody(input="remember X:1 p 1"))
    check(after.is_last and "already completed" in after.output, f"after the last {after}")

    steps = await api.list_agent_task_steps(task_id=tid)
    check([s.step_id for s in steps.steps] == [s1.step_id, s2.step_id, s3.step_id, after.step_id], "steps in order")
    check(steps.pagination.total_items == 4 and steps.pagination.total_pages == 1, f"{steps.pagination}")
    one = await api.get_agent_task_step(task_id=tid, step_id=s3.step_id)
    check(one.output == s3.output and one.is_last, f"get step {one}")
    task = await api.get_agent_task(task_id=tid)
    check(len(task.artifacts) == 3, f"task artifacts {task.artifacts}")
    return tid


async def paginate(api, tid):
    for i in range(3):
        await api.create_agent_task(task_request_body=TaskRequestBody(input=f"remember Thing:{i} n {i}"))
    everything = await api.list_agent_tasks()
    total = everything.pagination.total_items
    check(total == 4, f"4 tasks, got {everything.pagination}")
    seen = []
    for page in range(1, total + 1):
        r = await api.list_agent_tasks(current_page=page, page_size=1)
        check(len(r.tasks) == 1 and r.pagination.total_pages == total and r.pagination.current_page == page,
              f"page {page}: {r.pagination}")
        seen.append(r.tasks[0].task_id)
    check(len(set(seen)) == total and seen[0] == tid, f"pages cover every task once: {seen}")
    for huge in (total + 1, 10_000_000):
        r = await api.list_agent_tasks(current_page=huge, page_size=1)
        check(r.tasks == [] and r.pagination.total_items == total, f"page {huge}: {r}")
    r = await api.list_agent_task_steps(task_id=tid, current_page=2, page_size=3)
    check(len(r.steps) == 1 and r.pagination.total_pages == 2, f"steps page 2: {r.pagination}")
    r = await api.list_agent_task_artifacts(task_id=tid, current_page=3, page_size=1)
    check(len(r.artifacts) == 1 and r.pagination.total_items == 3, f"artifacts page 3: {r.pagination}")
    r = await api.list_agent_task_artifacts(task_id=tid, current_page=4, page_size=1)
    check(r.artifacts == [], f"artifacts past the end: {r}")
    fresh = (await api.list_agent_tasks(current_page=2, page_size=1)).tasks[0].task_id
    r = await api.list_agent_task_steps(task_id=fresh)
    check(r.steps == [] and r.pagination.total_items == 0 and r.pagination.total_pages == 0, f"no steps: {r}")


def raw_post(base, path, body):
    """A request the typed client refuses to send: status and JSON body."""
    req = urllib.request.Request(base + path, data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


async def errors(api, tid, tmp, base):
    unknown = "0190a0b0-0000-7000-8000-000000000000"
    await expect_error(api.get_agent_task(task_id=unknown), 404, "unknown task")
    await expect_error(api.get_agent_task(task_id="not-an-id"), 404, "malformed task id")
    await expect_error(api.list_agent_task_steps(task_id=unknown), 404, "steps of an unknown task")
    await expect_error(api.get_agent_task_step(task_id=tid, step_id=unknown), 404, "unknown step")
    await expect_error(api.list_agent_task_artifacts(task_id=unknown), 404, "artifacts of an unknown task")
    await expect_error(api.download_agent_task_artifact(task_id=tid, artifact_id=unknown), 404, "unknown artifact")
    await expect_error(api.execute_agent_task_step(task_id=unknown), 404, "step of an unknown task")
    await expect_error(api.list_agent_tasks(page_size=1000), 422, "page_size too large")
    await expect_error(api.create_agent_task(
        task_request_body=TaskRequestBody(input="x", additional_input={"agent": "no-such-network"})), 422, "unknown agent")
    f = os.path.join(tmp, "evil.txt")
    with open(f, "wb") as out:
        out.write(b"x")
    await expect_error(api.upload_agent_task_artifacts(task_id=tid, file=f, relative_path="../../etc"), 422, "traversal")
    await expect_error(api.upload_agent_task_artifacts(task_id=tid, file=f, relative_path="/etc/passwd"), 422, "absolute")
    for body in (b'{"input": 5}', b'{"additional_input": "x"}', b"[1]", b"{nope"):
        status, answer = raw_post(base, "/ap/v1/agent/tasks", body)
        check(status == 422 and isinstance(answer, dict) and answer.get("message"), f"{body!r}: {status} {answer}")


async def restart_mid_task(binary, tmp):
    data = os.path.join(tmp, "restart-data")
    server = Server(binary, data, os.path.join(tmp, "restart-1.log"))
    try:
        client, api = api_of(server)
        task = await api.create_agent_task(task_request_body=TaskRequestBody(input=PLAN))
        s1 = await api.execute_agent_task_step(task_id=task.task_id)
        check(not s1.is_last, "first step before the restart")
        blob = os.urandom(70_000)
        path = os.path.join(tmp, "kept.bin")
        with open(path, "wb") as f:
            f.write(blob)
        art = await api.upload_agent_task_artifacts(task_id=task.task_id, file=path)
        await client.close()
    finally:
        server.kill()
    server = Server(binary, data, os.path.join(tmp, "restart-2.log"))
    try:
        client, api = api_of(server)
        s2 = await api.execute_agent_task_step(task_id=task.task_id)
        s3 = await api.execute_agent_task_step(task_id=task.task_id)
        check(not s2.is_last and s3.is_last, f"steps after the restart: {s2.is_last}, {s3.is_last}")
        check("Org:acme" in s3.output and "City:paris" in s3.output, f"the task went on: {s3.output!r}")
        steps = await api.list_agent_task_steps(task_id=task.task_id)
        check([s.step_id for s in steps.steps] == [s1.step_id, s2.step_id, s3.step_id], "steps across the restart")
        data = await api.download_agent_task_artifact(task_id=task.task_id, artifact_id=art.artifact_id)
        check(bytes(data) == blob, "artifact bytes survive a restart")
        await client.close()
    finally:
        server.stop()


async def main(binary):
    with tempfile.TemporaryDirectory(prefix="tempora-ap-") as tmp:
        server = Server(binary, os.path.join(tmp, "data"), os.path.join(tmp, "server.log"))
        try:
            client, api = api_of(server)
            print("a task through all its steps, artifacts", flush=True)
            tid = await drive_a_task(api, tmp)
            print("pagination", flush=True)
            await paginate(api, tid)
            print("404 and 422", flush=True)
            await errors(api, tid, tmp, server.base)
            await client.close()
        except Exception:
            print(open(os.path.join(tmp, "server.log")).read()[-4000:], file=sys.stderr)
            raise
        finally:
            server.stop()
        print("restart in the middle of a task", flush=True)
        await restart_mid_task(binary, tmp)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    args = parser.parse_args()
    try:
        asyncio.run(main(args.bin))
    except Exception:
        traceback.print_exc()
        print("agent-protocol-client: FAILED")
        sys.exit(1)
    print("agent-protocol-client: all checks passed")
