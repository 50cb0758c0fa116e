"""The servers of ``python -m relviz bench --only class``: app processes pinned to cores, nginx in front.

Exists so that the class benchmark starts the app as DEPLOY.md tells an operator to (``MALLOC_ARENA_MAX=2``,
``OMP_WAIT_POLICY=PASSIVE``,
one ``STREAMLIT_SERVER_COOKIE_SECRET`` for every process, Debian's nginx with the shipped
``docs/nginx/relviz-processes.conf``, only its ports replaced), each process pinned to its own core with
``taskset`` so that the clients, pinned elsewhere, never share a core with the server they measure.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

__all__ = ["REPO", "NGINX_CONF", "free_port", "nginx_path", "wait_healthy", "stopping", "app_process", "nginx",
           "site_config"]

REPO = Path(__file__).resolve().parents[2]
NGINX_CONF = REPO / "docs" / "nginx" / "relviz-processes.conf"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def nginx_path() -> str | None:
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def wait_healthy(process: subprocess.Popen, base: str, what: str, timeout_s: float, poll_s: float = 0.2) -> None:
    """Return once ``base``/_stcore/health answers 200; RuntimeError naming ``what`` if the process exits or
    ``timeout_s`` passes first (the first-paint bench polls finer, since it times the start)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start on {base} (exit code {process.poll()})")
        time.sleep(poll_s)


@contextlib.contextmanager
def stopping(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def app_process(core: int | None, *, env: dict[str, str] | None = None, log: Path | None = None,
                timeout_s: float = 120.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """One app server on 127.0.0.1 (``taskset -c core`` when ``core`` is given); yields (base URL, process)."""
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless=true",
               "--server.address=127.0.0.1", f"--server.port={port}", "--browser.gatherUsageStats=false",
               "--server.fileWatcherType=none"]
    if core is not None and shutil.which("taskset"):
        command = ["taskset", "-c", str(core), *command]
    environment = {**os.environ, "MALLOC_ARENA_MAX": "2", "OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    out = open(log, "w") if log is not None else subprocess.DEVNULL
    process = subprocess.Popen(command, cwd=REPO, env=environment, stdout=out, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    with stopping(process):
        base = f"http://127.0.0.1:{port}"
        wait_healthy(process, base, "streamlit", timeout_s)
        yield base, process


def site_config(listen: int, backends: list[int]) -> str:
    """The shipped server block with this run's ports: its upstream lists ``backends``."""
    text = NGINX_CONF.read_text()
    servers = "".join(f"    server 127.0.0.1:{port};\n" for port in backends)
    text, count = re.subn(r"(upstream relviz \{\n    hash [^\n]*\n)(?:    server [^\n]*\n)+", r"\g<1>" + servers, text)
    if count != 1:
        raise RuntimeError(f"{NGINX_CONF} has no upstream block of server lines")
    text, count = re.subn(r"listen 80;", f"listen 127.0.0.1:{listen};", text)
    if count != 1:
        raise RuntimeError(f"{NGINX_CONF} has no 'listen 80;'")
    return text


@contextlib.contextmanager
def nginx(backends: list[int], cores: list[int] | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """Debian's nginx (one worker, not a daemon, its files in a temporary folder) in front of ``backends``,
    pinned to ``cores``: yields (its base URL, its process)."""
    binary = nginx_path()
    if binary is None:
        raise RuntimeError("nginx is not installed (apt-get install -y nginx)")
    listen = free_port()
    with tempfile.TemporaryDirectory(prefix="relviz-class-nginx-") as tmp:
        folder = Path(tmp)
        (folder / "relviz.conf").write_text(site_config(listen, backends))
        (folder / "nginx.conf").write_text(f"""
pid {folder}/nginx.pid;
error_log {folder}/error.log;
worker_processes 1;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    include {folder}/relviz.conf;
}}
""")
        command = [binary, "-p", str(folder), "-c", str(folder / "nginx.conf"), "-g", "daemon off;"]
        if cores and shutil.which("taskset"):
            command = ["taskset", "-c", ",".join(map(str, cores)), *command]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        with stopping(process):
            base = f"http://127.0.0.1:{listen}"
            wait_healthy(process, base, "nginx", 30)
            yield base, process


def cookie_secret() -> str:
    """One secret for every process (DEPLOY.md: an XSRF cookie one process signed is valid on the others)."""
    return secrets.token_hex(16)
