"""Many sessions opening pages at once on a freshly started server, over Streamlit's own websocket.

A session here is what a browser tab does on its first visit, without the browser: open
/_stcore/stream, send one rerun request (the page name from the URL path and the query string),
then read the server's messages until the script run finishes. Each session records what a
visitor would see: the sidebar navigation the server sent (page titles, or raw file names), the
exception boxes, the errors, and whether the page drew a title.

Run directly for a manual look: python tests/cold_start_support.py [SESSIONS]
"""
from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


SIDEBAR = 1  # a delta's path starts with its root container: 0 the main area, 1 the sidebar


@dataclass
class ColdSession:
    """What one first visit received from the server."""

    page: str
    query: str
    navigation: list[list[str]] = field(default_factory=list)  # page names of each visible navigation
    page_links: list[str] = field(default_factory=list)  # labels of the sidebar's page links
    exceptions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    elements: int = 0
    finished: str = ""
    seconds: float = 0.0
    failure: str = ""

    @property
    def first_navigation(self) -> list[str]:
        return self.navigation[0] if self.navigation else []


def read_message(message: ForwardMsg, session: ColdSession) -> None:
    """Record in ``session`` what ``message`` shows a visitor (navigation, links, errors, titles, the end)."""
    kind = message.WhichOneof("type")
    if kind == "navigation" and message.navigation.position != message.navigation.HIDDEN:
        session.navigation.append([page.page_name for page in message.navigation.app_pages])
    elif kind == "new_session" and not message.new_session.config.hide_sidebar_nav:
        session.navigation.append([page.page_name for page in message.new_session.app_pages])
    elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
        element = message.delta.new_element
        session.elements += 1
        which = element.WhichOneof("type")
        if which == "exception":
            session.exceptions.append(f"{element.exception.type}: {element.exception.message}"[:400])
        elif which == "alert" and element.alert.format == element.alert.ERROR:
            session.errors.append(element.alert.body[:300])
        elif which == "page_link" and message.metadata.delta_path[:1] == [SIDEBAR]:
            session.page_links.append(element.page_link.label)
        elif which == "heading" and element.heading.tag == "h1":
            session.titles.append(element.heading.body)
    elif kind == "script_finished":
        session.finished = ForwardMsg.ScriptFinishedStatus.Name(message.script_finished)


async def open_session(base: str, page: str, query: str = "", timeout_s: float = 240.0,
                       delay_s: float = 0.0) -> ColdSession:
    """One first visit of ``{base}/{page}?{query}`` after ``delay_s``; returns what the server sent."""
    session = ColdSession(page, query)
    await asyncio.sleep(delay_s)
    started = time.perf_counter()
    url = base.replace("http://", "ws://", 1) + "/_stcore/stream"
    request = BackMsg()
    request.rerun_script.query_string = query
    request.rerun_script.page_name = page
    request.rerun_script.page_script_hash = ""
    try:
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=None,
                                      open_timeout=timeout_s) as socket:
            await socket.send(request.SerializeToString())
            async with asyncio.timeout(timeout_s):
                while not session.finished.startswith("FINISHED"):
                    data = await socket.recv()
                    read_message(ForwardMsg.FromString(data), session)
    except Exception as error:  # noqa: BLE001 - a refused, dropped or hung session is the finding
        session.failure = f"{type(error).__name__}: {error}"[:300]
    session.seconds = time.perf_counter() - started
    return session


async def open_at_once(base: str, visits: list[tuple[str, str]], timeout_s: float = 240.0,
                       spread_s: float = 0.0) -> list[ColdSession]:
    """Every visit (page name, query string) opened within ``spread_s`` seconds (evenly spaced), as a
    class arrives: the first visits import while the later ones already run pages."""
    step = spread_s / max(1, len(visits) - 1)
    return list(await asyncio.gather(*(open_session(base, page, query, timeout_s, i * step)
                                       for i, (page, query) in enumerate(visits))))


def class_arriving(sessions: int) -> list[tuple[str, str]]:
    """``sessions`` first visits spread over every page (deep links, as a shared link would open them)."""
    from relviz.app.navigation import PAGES

    names = [Path(page.path).stem for page in PAGES]
    return [(names[i % len(names)], "") for i in range(sessions)]


if __name__ == "__main__":
    from browser_support import app_server

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 13
    spread = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    with app_server() as base:
        results = asyncio.run(open_at_once(base, class_arriving(count), spread_s=spread))
    for result in results:
        print(f"{result.page:12} {result.finished:28} {result.seconds:6.1f} s  nav={result.navigation} links={result.page_links[:3]} "
              f"exceptions={result.exceptions} errors={result.errors[:1]} titles={result.titles[:1]} "
              f"{result.failure}")
