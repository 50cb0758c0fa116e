"""The deployment configuration (.streamlit/config.toml) is safe, and a running server honours it.

Static checks parse the TOML with tomllib; a subprocess asks Streamlit itself what it read; a
live server on loopback shows the effect: an XSRF cookie, uploads refused without its token, no
CORS header for a foreign origin, and a websocket from a foreign origin refused (no cross-site
websocket hijacking).
"""
from __future__ import annotations

import base64
import http.client
import json
import os
import subprocess
import sys
import tomllib

import pytest

from browser_support import REPO, app_server
from relviz.app.internals import XSRF_COOKIE

CONFIG = REPO / ".streamlit" / "config.toml"

#: option -> the value a deployment needs (None: checked by a dedicated assertion below).
REQUIRED = {
    "server.enableXsrfProtection": True,
    "server.enableCORS": True,
    "server.headless": True,
    "server.fileWatcherType": "none",
    "server.runOnSave": False,
    "server.allowRunOnSave": False,
    "server.enableStaticServing": False,
    "server.enableAgentApi": False,
    "server.scriptHealthCheckEnabled": False,
    "browser.gatherUsageStats": False,
}


def flat(table: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.fixture(scope="module")
def settings() -> dict:
    with open(CONFIG, "rb") as handle:
        return flat(tomllib.load(handle))


def test_security_settings_are_on(settings):
    wrong = {key: settings.get(key, "<unset>") for key, value in REQUIRED.items() if settings.get(key) != value}
    assert not wrong, f"{CONFIG.name}: these must be {[REQUIRED[k] for k in wrong]}: {wrong}"


def test_error_details_are_limited(settings):
    # "full" and "stacktrace" send tracebacks (file paths, code) to every browser.
    assert settings.get("client.showErrorDetails") in ("type", "none")
    assert str(settings.get("client.showErrorLinks")).lower() == "false"
    assert settings.get("client.toolbarMode") in ("minimal", "viewer")


def test_uploads_and_messages_are_small(settings):
    assert isinstance(settings.get("server.maxUploadSize"), int) and settings["server.maxUploadSize"] <= 3  # relviz.check.MAX_BYTES
    assert isinstance(settings.get("server.maxWidgetStateSize"), int) and settings["server.maxWidgetStateSize"] <= 2
    assert isinstance(settings.get("server.maxMessageSize"), int) and settings["server.maxMessageSize"] <= 100
    size = str(settings.get("server.maxCacheDataSize", "0")).lower()
    assert size not in ("", "0"), "server.maxCacheDataSize must bound the cache_data memory of all sessions"


def test_cookies_and_origins(settings):
    assert settings.get("server.xsrfCookieSameSite", "lax") in ("lax", "strict")
    assert "*" not in settings.get("server.corsAllowedOrigins", [])
    assert settings.get("client.allowedOrigins") == [], "no foreign frame may drive the app through postMessage"
    assert "*" not in settings.get("server.allowedHosts", [])


def test_no_secrets_or_machine_specific_settings(settings):
    for key in ("server.cookieSecret", "server.sslCertFile", "server.sslKeyFile", "server.address", "server.port",
                "global.developmentMode"):
        assert key not in settings, f"{key} belongs to a deployment's own settings, not the repository"


def test_every_key_is_a_streamlit_option(settings):
    from streamlit import config

    known = set(config._config_options_template)
    unknown = sorted(key for key in settings if key not in known and not key.startswith("theme."))
    assert not unknown, f"not Streamlit options (typos are silently ignored): {unknown}"


def test_streamlit_reads_the_file_as_written(settings):
    """Streamlit itself, started in the repository, sees exactly these values (a subprocess, so this
    process's Streamlit configuration is left alone)."""
    keys = sorted(key for key in settings if not key.startswith("theme."))
    code = ("import json, sys; from streamlit import config; config.get_config_options(force_reparse=True); "
            "print(json.dumps({k: config.get_option(k) for k in sys.argv[1:]}))")
    result = subprocess.run([sys.executable, "-c", code, *keys], cwd=REPO, capture_output=True, text=True,
                            timeout=120, check=True)
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {key: settings[key] for key in keys}


# ---------------------------------------------------------------------------------------
# A live server


@pytest.fixture(scope="module")
def server():
    with app_server() as base:
        host, port = base.removeprefix("http://").split(":")
        yield base, host, int(port)


def request(server, method: str, path: str, headers: dict | None = None, body: bytes | None = None):
    _, host, port = server
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_live_xsrf_cookie_and_upload_refused_without_token(server):
    status, headers, _ = request(server, "GET", "/_stcore/health")
    assert status == 200
    assert f"{XSRF_COOKIE}=" in headers.get("set-cookie", ""), headers
    status, _, body = request(server, "PUT", "/_stcore/upload_file/session/file",
                              {"Content-Type": "multipart/form-data; boundary=x"}, b"--x--\r\n")
    assert status == 403, (status, body[:200])


def test_live_no_cors_header_for_a_foreign_origin(server):
    _, headers, _ = request(server, "GET", "/_stcore/health", {"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in headers, headers
    _, headers, body = request(server, "GET", "/_stcore/host-config", {"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in headers, headers
    assert json.loads(body)["allowedOrigins"] == []


@pytest.mark.parametrize("origin, allowed", [("same", True), ("http://evil.example", False), ("null", False),
                                             ("http://127.0.0.1.evil.example", False)])
def test_live_websocket_only_from_the_app_origin(server, origin, allowed):
    """A page on another site must not open a session with the user's cookies (cross-site websocket
    hijacking): the upgrade is refused unless the Origin is the app's own."""
    base = server[0]
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(), "Sec-WebSocket-Protocol": "streamlit",
               "Origin": base if origin == "same" else origin}
    status, _, _ = request(server, "GET", "/_stcore/stream", headers)
    assert (status == 101) == allowed, f"Origin {headers['Origin']}: HTTP {status}"
