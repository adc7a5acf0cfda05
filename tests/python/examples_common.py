"""Shared by the tests/python/examples_*.py runners (scripts/examples.sh):
starting the real `tempora serve` and reporting one line per example.

Only the standard library: every runner imports it, whatever venv it runs in.
"""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "tests", "examples")

# Every example, and every check, ends within this (or fails).
EXAMPLE_SECONDS = int(os.environ.get("EXAMPLES_TIMEOUT_SECS", "120"))

_results = []


class ExampleTimeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise ExampleTimeout(f"did not finish within {EXAMPLE_SECONDS} s")


def _terminated(signum, _frame):
    # scripts/examples.sh's outer timeout: unwind, so the servers are stopped.
    raise SystemExit(f"terminated by signal {signum}")


signal.signal(signal.SIGTERM, _terminated)


def run(name, fn):
    """Runs one example check: prints `ok <name>[: note]` or `FAILED <name>: why`,
    and goes on. `fn` may return a note (a string) for the ok line."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(EXAMPLE_SECONDS + 30)
    try:
        note = fn()
        _results.append((name, True))
        print(f"ok {name}" + (f": {note}" if note else ""), flush=True)
    except Exception as e:  # report and go on with the next example
        _results.append((name, False))
        why = str(e) or type(e).__name__
        if not isinstance(e, (AssertionError, ExampleTimeout)):
            why = f"{type(e).__name__}: {why}"
        print(f"FAILED {name}: {why}", flush=True)
        if os.environ.get("EXAMPLES_TRACE"):
            traceback.print_exc()
    finally:
        signal.alarm(0)


def finish():
    """The runner's exit status: 1 if any example failed."""
    failed = [n for n, ok in _results if not ok]
    return 1 if failed else 0


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def tail(text, lines=8):
    """The last lines of a process's output, on one line."""
    got = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " | ".join(got[-lines:])


def port_is_free(port):
    """Whether nothing listens on localhost:PORT (IPv4 or IPv6) and
    127.0.0.1:PORT can be bound: then the examples' own address can be used."""
    for family, addr in ((socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.1")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        s.settimeout(1)
        try:
            s.connect((addr, port))
            return False  # someone answers there
        except OSError:
            pass
        finally:
            s.close()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # As servers bind: connections of a server stopped just before (in
    # TIME_WAIT) do not keep the port.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Server:
    """A running `tempora serve`: `base` (http://host:port), `http_port`,
    `tcp` ((host, port) or None), `log_path`."""

    def __init__(self, proc, log_path, addrs):
        self.proc = proc
        self.log_path = log_path
        self.http = addrs.get("http")
        self.tcp = addrs.get("tcp")
        self.base = f"http://{self.http[0]}:{self.http[1]}" if self.http else None
        self.http_port = self.http[1] if self.http else None

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()


def _start(binary, tmp, http_addr, tcp_addr, env_extra, config_text):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORA_")}
    env.update({"TEMPORA_LOG": "info", "NO_COLOR": "1"})
    env.update(env_extra or {})
    data = tempfile.mkdtemp(prefix="data-", dir=tmp)
    cmd = [binary, "serve", "--data-dir", data, "--http-addr", http_addr, "--grpc-addr", "off",
           "--tcp-addr", tcp_addr]
    if config_text is not None:
        cfg = os.path.join(tmp, "tempora.toml")
        with open(cfg, "w") as f:
            f.write(config_text)
        cmd += ["--config", cfg]
    log_path = os.path.join(tmp, f"server-{os.path.basename(data)}.log")
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    want = [name for name, addr in (("http", http_addr), ("tcp", tcp_addr)) if addr != "off"]
    deadline = time.time() + 60
    while True:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        addrs = {}
        for name in want:
            m = re.search(name + r" listening on (\d+\.\d+\.\d+\.\d+):(\d+)", text)
            if m:
                addrs[name] = (m.group(1), int(m.group(2)))
        if len(addrs) == len(want):
            return Server(proc, log_path, addrs)
        if proc.poll() is not None or time.time() > deadline:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            return text


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def serve(binary, *, prefer_http_port=None, tcp=False, http=True, env=None, config_text=None):
    """`tempora serve` with a temporary data directory. HTTP on
    127.0.0.1:PREFER_HTTP_PORT when that port is free (the address the
    examples are written for), else on a free port; TCP (NeuroDock) on a free
    port when `tcp`; gRPC off. Yields a Server."""
    with tempfile.TemporaryDirectory(prefix="tempora-examples-") as tmp:
        tcp_addr = "127.0.0.1:0" if tcp else "off"
        http_addrs = ["127.0.0.1:0"] if http else ["off"]
        if http and prefer_http_port and port_is_free(prefer_http_port):
            http_addrs.insert(0, f"127.0.0.1:{prefer_http_port}")
        server = None
        for http_addr in http_addrs:
            got = _start(binary, tmp, http_addr, tcp_addr, env, config_text)
            if isinstance(got, Server):
                server = got
                break
            # The preferred port was taken in between: fall back to a free one.
            last_log = got
        if server is None:
            raise RuntimeError("tempora did not start: " + tail(last_log, 20))
        try:
            yield server
        finally:
            _stop(server.proc)


def run_example(cmd, *, cwd, stdin_text=None, env=None):
    """Runs one example as its own process, bounded by EXAMPLE_SECONDS.
    Returns (returncode, stdout, stderr); a timeout raises ExampleTimeout
    carrying the output so far."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdin=subprocess.PIPE if stdin_text is not None
                            else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(stdin_text, timeout=EXAMPLE_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        e = ExampleTimeout(f"did not finish within {EXAMPLE_SECONDS} s (killed)")
        e.stdout, e.stderr = out, err
        raise e
    return proc.returncode, out, err


def example_source(name, tmp, *, written_for, base):
    """The path of tests/examples/NAME to run: the file itself when the
    server is at the address the example is written for (`written_for`, a
    URL such as http://localhost:8000), else a copy in TMP with that one
    address replaced by `base`. Returns (path, how)."""
    path = os.path.join(EXAMPLES, name)
    if base is None:
        return path, "verbatim"
    with open(path, encoding="utf-8") as f:
        text = f.read()
    check(written_for in text, f"{name} does not contain {written_for}")
    copy = os.path.join(tmp, name)
    with open(copy, "w", encoding="utf-8") as f:
        f.write(text.replace(written_for, base))
    return copy, f"verbatim but {written_for} -> {base}"


def python():
    return sys.executable
