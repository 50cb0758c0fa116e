"""Many users at once: 24 sessions on one server (3 in Chromium, the rest over Streamlit's
websocket), all moving sliders together, and a fresh Chromium visitor arriving meanwhile; then the
same through Debian's nginx in front of two app processes (docs/nginx/relviz-processes.conf: sticky
sessions by cookie, websockets), where every process must hold sessions.

See tests/load_support.py for how the sessions run. This test asserts what must hold on any
machine: every session opened, moved its slider and saw exactly its own values (no state from
another session), no exception or error box and no JavaScript error, no traceback in the server
log, and the server's memory stayed bounded. Timings are reported (printed with -s, and in
test-artifacts/load.json), not asserted, beyond a sanity bound: every response arrived within
the per-action timeout.

Tune with RELVIZ_LOAD_SESSIONS (default 24, at least 20; at least 10 with RELVIZ_LOAD_HEAVY=1, which
opens every page at its heaviest settings, load_support.HEAVIEST), RELVIZ_LOAD_BROWSERS (how many
of them are Chromium tabs, default 3) and RELVIZ_LOAD_MOVES (default 3).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from browser_support import REPO, chromium_path
from load_support import ACTION_TIMEOUT_MS, HEAVIEST, run_load
from proxy_support import nginx_path

ARTIFACT = REPO / "test-artifacts" / ("load-heavy.json" if os.environ.get("RELVIZ_LOAD_HEAVY") == "1" else "load.json")
HEAVY = os.environ.get("RELVIZ_LOAD_HEAVY") == "1"
SESSIONS = max(10 if HEAVY else 20, int(os.environ.get("RELVIZ_LOAD_SESSIONS", "24")))
MOVES = max(1, int(os.environ.get("RELVIZ_LOAD_MOVES", "3")))
BROWSERS = min(SESSIONS, max(1, int(os.environ.get("RELVIZ_LOAD_BROWSERS", "3"))))
#: The run fails as stuck only when nothing progressed for this long (no session and no server probe);
#: a merely slow machine keeps going, up to the hard cap below (a safety net, far above any slow run).
STALL_S = 180.0
DEADLINE_S = 1800.0
#: What the server may reach: the modules (~0.55 GB at the heaviest settings), every cache full
#: (st.cache_data 256 MB by server.maxCacheDataSize, st.cache_resource ~0.1 GB: tests/cache_sizes.py),
#: freed memory glibc keeps (0.1-0.3 GB) and the runs in flight; docs/DEPLOY.md, "Caches and memory".
#: Measured peaks: 0.41 GB (24 sessions), 0.67-0.78 GB (10 at the heaviest settings). A leak, or a
#: cache without a bound, crosses it.
RSS_BOUND_MB = 1536

if chromium_path() is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)


@pytest.fixture(scope="module", params=[1, 2], ids=["one process", "two processes behind nginx"])
def figures(request):
    processes = request.param
    if processes > 1 and nginx_path() is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is missing: .ci/run installs it (apt-get install -y nginx)")
        pytest.skip("Debian's nginx is not installed (apt-get install -y nginx); CI installs it")
    result = run_load(sessions=SESSIONS, moves=MOVES, deadline_s=DEADLINE_S, stall_s=STALL_S,
                      queries=HEAVIEST if HEAVY else None, browsers=BROWSERS, processes=processes)
    artifact = ARTIFACT if processes == 1 else ARTIFACT.with_name(ARTIFACT.stem + "-nginx.json")
    artifact.parent.mkdir(parents=True, exist_ok=True)
    artifact.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\n[load{' through nginx, ' + str(processes) + ' processes ' + str(result['sessions_per_process']) if processes > 1 else ''}] "
          f"{result['sessions']} sessions{' at the heaviest settings' if HEAVY else ''} "
          f"({result['browser_sessions']} Chromium, {result['websocket_sessions']} websocket; {result['pages']}), "
          f"server gauge peak {result['sessions_held_max_server_gauge']} active sessions; {result['moves_done']} "
          f"slider moves (+{result['load_moves_done']} while the newcomer waited); slowest response "
          f"{result['slowest_response_s']} s ({result['slowest_response_where']}), median {result['median_response_s']} s; "
          f"server per move (websocket sessions): median {result['server_move_median_s']} s, slowest "
          f"{result['server_move_max_s']} s; Chromium per move: median {result['browser_move_median_s']} s, slowest "
          f"{result['browser_move_max_s']} s; slowest page open {result['slowest_open_s']} s; server alone (probe): "
          f"median {result['probe_median_s']} s, slowest {result['probe_max_s']} s over {result['probe_answers']} "
          f"answers; a fresh visitor's first chart {result['fresh_visitor_first_chart_s']} s (the server answered "
          f"{result['runs_answered_while_fresh_visitor_waited']} other runs meanwhile); server RSS "
          f"{result['baseline_rss_mb']} MB started, {result['warm_rss_mb']} MB after every page once, peak "
          f"{result['peak_rss_mb']} MB, {result['closed_rss_mb']} MB when the sessions closed, {result['rest_rss_mb']} MB "
          f"one trim period later (caches then: "
          f"st.cache_data {result['rest_caches'].get('cache_data_mb')} MB, "
          f"{result['rest_caches'].get('cache_resource_entries')} st.cache_resource entries); "
          f"CPU: server {result['server_cpu_s']} s, Chromium {result['browser_cpu_s']} s on {result['machine_cpus']} "
          f"cores (load average at the end {result['load_average_at_end']}); "
          f"{result['seconds']} s in all; {len(result['failures'])} failed sessions, "
          f"{len(result['sessions_unavailable'])} on unavailable pages {sorted({v.split(':')[0] for v in result['sessions_unavailable'].values()})}")
    return result


def test_every_session_sees_only_its_own_moves(figures):
    failures = figures["failures"]
    assert not failures, "\n".join(
        f"session {f['index']} on {f['page']} ({f['slider']}): {f['problems'] + f['errors']}" for f in failures[:10])
    unavailable = figures["sessions_unavailable"]
    # A page that shows an error instead of its controls (e.g. a results file not generated yet)
    # cannot be moved: it is reported, and the other sessions must still number at least 20.
    assert figures["sessions_completed"] + len(unavailable) == SESSIONS
    assert figures["sessions_completed"] >= min(SESSIONS, 20), f"only {figures['sessions_completed']} sessions moved sliders; " \
        f"unavailable: {sorted(set(unavailable.values()))}"
    assert figures["moves_done"] == figures["sessions_completed"] * MOVES


def test_the_sessions_were_held_at_the_same_time(figures):
    # Every session stays connected from its first page load to the final check; the server's own
    # gauge (sampled once a second) must have seen them all at once.
    assert figures["sessions_held_max_server_gauge"] >= min(SESSIONS, 20), figures["sessions_held_max_server_gauge"]


def test_server_memory_stays_bounded(figures):
    assert figures["rss_samples"] > 0
    bound = RSS_BOUND_MB * figures["processes"]          # behind nginx: the processes' sum
    assert figures["peak_rss_mb"] < bound, f"server peak RSS {figures['peak_rss_mb']} MB"


def test_the_proxy_spreads_the_sessions_over_the_processes(figures):
    """Behind nginx every process held sessions (its own gauge), and the sum held them all at once."""
    if figures["processes"] == 1:
        pytest.skip("one process: no proxy")
    assert len(figures["sessions_per_process"]) == figures["processes"]
    assert all(count >= 1 for count in figures["sessions_per_process"]), figures["sessions_per_process"]


def test_the_server_alone_kept_answering(figures):
    """Server-side responsiveness, apart from the browsers' rendering: every probe (a websocket session
    of the landing page, no browser) got its page. Its times are reported, not asserted."""
    assert figures["probe_answers"] > 0 and figures["probe_failures"] == 0, figures


def test_the_server_log_has_no_traceback(figures):
    for name in figures["server_logs"]:
        log = Path(name)
        text = log.read_text() if log.exists() else ""
        assert "Traceback" not in text, text[text.find("Traceback"):][:2000]


def test_a_fresh_visitor_got_its_first_chart(figures):
    # The figure itself is reported; that a newcomer gets a chart at all on a loaded server is asserted.
    assert isinstance(figures["fresh_visitor_first_chart_s"], float), figures["fresh_visitor_first_chart_s"]


def test_every_response_arrived(figures):
    # A sanity bound only: timings on a loaded 2-core machine vary widely; they are reported, not tested.
    assert figures["slowest_response_s"] is not None
    assert figures["slowest_response_s"] < ACTION_TIMEOUT_MS / 1000
