"""Several app processes behind Debian's nginx, configured by docs/nginx/relviz-processes.conf itself.

``proxied_app(n)`` starts n streamlit processes (one shared server.cookieSecret, as DEPLOY.md says) and
nginx in front of them on free ports, and yields (the proxy's base URL, the processes' base URLs). The
configuration is the documented file with only its ports replaced, so the test checks what operators
copy.
"""
from __future__ import annotations

import contextlib
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from browser_support import REPO, app_server, free_port, serving

CONF = REPO / "docs" / "nginx" / "relviz-processes.conf"


def nginx_path() -> str | None:
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def site_config(listen: int, backends: list[int]) -> str:
    """The documented server block with this run's ports: its upstream lists ``backends``."""
    text = CONF.read_text()
    servers = "".join(f"    server 127.0.0.1:{port};\n" for port in backends)
    text, count = re.subn(r"(upstream relviz \{\n    hash [^\n]*\n)(?:    server [^\n]*\n)+", r"\g<1>" + servers, text)
    assert count == 1, "docs/nginx/relviz-processes.conf has no upstream block of server lines"
    text, count = re.subn(r"listen 80;", f"listen 127.0.0.1:{listen};", text)
    assert count == 1, "docs/nginx/relviz-processes.conf has no 'listen 80;'"
    return text


@contextlib.contextmanager
def nginx(listen: int, backends: list[int], folder: Path) -> Iterator[str]:
    """nginx (not as a daemon, its files in ``folder``) proxying 127.0.0.1:listen to ``backends``."""
    (folder / "relviz.conf").write_text(site_config(listen, backends))
    (folder / "nginx.conf").write_text(f"""
pid {folder}/nginx.pid;
error_log {folder}/error.log;
worker_processes 1;
events {{ worker_connections 1024; }}
http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    include {folder}/relviz.conf;
}}
""")
    process = subprocess.Popen([nginx_path(), "-p", str(folder), "-c", str(folder / "nginx.conf"), "-g", "daemon off;"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    error_log = folder / "error.log"
    with serving(process, f"http://127.0.0.1:{listen}", what="nginx", timeout=30,
                 log=lambda: error_log.read_text() if error_log.exists() else "") as base:
        yield base


@contextlib.contextmanager
def proxied_app(processes: int = 2) -> Iterator[tuple[str, list[str]]]:
    """``processes`` app servers sharing one cookie secret, nginx in front: (proxy base, backend bases)."""
    secret = secrets.token_hex(16)
    with contextlib.ExitStack() as stack:
        # server.cookieSecret cannot be set on the command line; the environment is what DEPLOY.md shows
        bases = [stack.enter_context(app_server(env={"STREAMLIT_SERVER_COOKIE_SECRET": secret}))
                 for _ in range(processes)]
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="relviz-nginx-")))
        ports = [int(base.rsplit(":", 1)[1]) for base in bases]
        front = stack.enter_context(nginx(free_port(), ports, folder))
        yield front, bases
