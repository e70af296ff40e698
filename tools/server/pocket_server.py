"""Starts `pocket serve` on a free loopback port for a test and stops it.

    with PocketServer(pocket, model, "-p", "2") as srv:
        srv.url        # http://127.0.0.1:PORT
        srv.rss_kb()   # the server's resident memory
        srv.metrics()  # /metrics as {name{labels}: value}
"""
import json
import re
import subprocess
import time
import urllib.request


class PocketServer:
    def __init__(self, pocket, model, *args, api_key=None):
        cmd = [pocket, "serve", "-m", model, "--port", "0", "-t", "2", *args]
        if api_key:
            cmd += ["--api-key", api_key]
        self.api_key = api_key
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"on http://([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"pocket serve did not start: {line}{self.proc.stderr.read()}")
        self.url = f"http://{m.group(1)}:{m.group(2)}"
        self.host, self.port = m.group(1), int(m.group(2))
        self._wait_healthy()

    def _wait_healthy(self):
        for _ in range(100):
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("pocket serve never answered /health")

    def get(self, path):
        req = urllib.request.Request(self.url + path)
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read().decode()

    def metrics(self):
        out = {}
        for line in self.get("/metrics").splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def health(self):
        return json.loads(self.get("/health"))

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: the server stops cleanly
            try:
                rc = self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise RuntimeError("pocket serve did not stop on SIGTERM")
            if rc != 0:
                raise RuntimeError(f"pocket serve exited with {rc}: {self.proc.stderr.read()}")
        self.proc.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
