"""The students of ``python -m relviz bench --only class``: websocket sessions that send what a tab sends.

Run as its own process (``python -m relviz.bench.class_clients PLAN.json OUT.json``), pinned by the caller
to cores the server does not use, so the clients' work never counts as the server's. Each student opens the
plan's link at its arrival time (the open-loop schedule: arrivals spread over ``arrive_s``), then moves the
plan's control to a value of its own every ``move_every_s`` (drawn uniformly) until ``duration_s`` after
its arrival. A move is the rerun a browser sends after a drag: the control's new value as its widget state,
the address bar's query string, and the fragment the control lives in (``st.fragment``: the browser then
reruns only that fragment). A move that is still unanswered when the next is due waits for the answer
(a student sees the chart before moving again); how late it went out is recorded.

Each student records the time to its first chart (the first chart element the server sent: a plotly chart
or relviz's canvas), each move's response time (request sent -> the run finished), errors, and a digest of
the charts each run drew. :func:`check_isolation` reads those digests across students: every student who set
the same value must have seen the same charts, and two values must never give the same charts; a session that
drew another session's value breaks one of the two.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ClassPlan", "Student", "run_plan", "check_isolation", "main"]

#: Longest a student waits for one answer (a stuck server is a failure, not a hang).
ANSWER_TIMEOUT_S = 120.0


@dataclass
class ClassPlan:
    """What the class does: the link (page and query), the control moved and the schedule."""

    base: str                   # http://host:port of the server (or the proxy)
    page: str                   # the page's URL name (file stem)
    query: str                  # the link's query string
    control: str                # the URL key of the slider the students move
    students: int = 30
    arrive_s: float = 10.0      # every student opens the link within this many seconds
    duration_s: float = 120.0   # each student moves for this long after arriving
    move_every_s: tuple[float, float] = (5.0, 10.0)
    seed: int = 0


@dataclass
class Student:
    index: int
    arrival_s: float = 0.0
    first_chart_s: float | None = None     # link opened -> first chart element received
    open_s: float | None = None            # link opened -> first run finished
    moves: list[dict[str, Any]] = field(default_factory=list)   # value, seconds, late_s, charts digest
    errors: list[str] = field(default_factory=list)
    charts_at_open: str = ""


def _digest(specs: list[str]) -> str:
    """The charts of one run, whatever the order of each chart's JSON keys."""
    canon = [json.dumps(json.loads(spec), sort_keys=True) for spec in specs]
    return hashlib.sha1("\n".join(canon).encode()).hexdigest()[:16]



def streamlit_protos() -> tuple[type, type, type]:
    """Streamlit's BackMsg, ForwardMsg and WidgetState: what a tab sends and receives (the app extra)."""
    try:
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        from streamlit.proto.WidgetStates_pb2 import WidgetState
    except ImportError as error:
        raise RuntimeError("bench --only class drives the app: pip install \".[app]\"") from error
    return BackMsg, ForwardMsg, WidgetState

class Session:
    """One tab's websocket: runs the page, reruns it with a changed control, reads what comes back."""

    def __init__(self, base: str, page: str, query: str) -> None:
        self.url = base.replace("http://", "ws://", 1) + "/_stcore/stream"
        self.page, self.query = page, query
        self.page_hash = ""
        self.sliders: dict[str, Any] = {}          # URL key -> the slider's proto
        self.fragments: dict[str, str] = {}        # URL key -> the fragment the slider was drawn in
        self.tabs: dict[str, tuple[str, list[str]]] = {}  # URL key -> a tab row's widget id and its tabs' labels
        self.address: str | None = None            # the query string the server last put in the address bar
        self.socket = None

    async def connect(self) -> None:
        try:
            import websockets
        except ImportError as error:  # a dev tool, pinned in requirements-dev.txt
            raise RuntimeError("bench --only class needs websockets: pip install -r requirements-dev.txt") from error

        self.socket = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None,
                                               open_timeout=ANSWER_TIMEOUT_S, ping_interval=None)

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()

    @classmethod
    async def visit(cls, base: str, page: str, query: str) -> dict[str, Any]:
        """One fresh tab's first run of ``page?query`` (:meth:`run`'s result); the socket is closed after."""
        session = cls(base, page, query)
        await session.connect()
        try:
            return await session.run()
        finally:
            await session.close()

    async def run(self, widget=None, fragment_id: str = "") -> dict[str, Any]:
        """One run: the first visit, or a rerun with ``widget`` (a WidgetState) changed. Returns seconds to
        the first chart and to the end, the charts' specs, the markdown texts and the count of elements it sent,
        errors and how the run ended (``finished``: a whole run or a fragment's)."""
        BackMsg, ForwardMsg, _ = streamlit_protos()

        request = BackMsg()
        request.rerun_script.query_string = self.query
        request.rerun_script.page_name = self.page
        request.rerun_script.page_script_hash = self.page_hash
        if fragment_id:
            request.rerun_script.fragment_id = fragment_id
        if widget is not None:
            request.rerun_script.widget_states.widgets.append(widget)
        charts: list[str] = []
        chart_ids: list[str] = []     # each chart's element id: the same id is the same chart, redrawn in place
        texts: list[str] = []
        errors: list[str] = []
        elements = 0
        first_chart = None
        finished = ""
        started = time.perf_counter()
        await self.socket.send(request.SerializeToString())
        async with asyncio.timeout(ANSWER_TIMEOUT_S):
            while not finished.startswith("FINISHED"):
                message = ForwardMsg.FromString(await self.socket.recv())
                if message.HasField("navigation"):
                    self.page_hash = message.navigation.page_script_hash
                elif message.HasField("page_info_changed"):
                    self.address = message.page_info_changed.query_string
                elif message.HasField("delta") and message.delta.HasField("add_block"):
                    block = message.delta.add_block
                    if block.HasField("tab_container") and block.tab_container.query_param_key:
                        self.tabs[block.tab_container.query_param_key] = (block.tab_container.id, [])
                    elif block.HasField("tab") and self.tabs:
                        list(self.tabs.values())[-1][1].append(block.tab.label)
                elif message.HasField("script_finished"):
                    finished = ForwardMsg.ScriptFinishedStatus.Name(message.script_finished)
                elif message.HasField("delta") and message.delta.HasField("new_element"):
                    element = message.delta.new_element
                    elements += 1
                    if element.HasField("markdown"):
                        texts.append(element.markdown.body)
                    spec = (element.plotly_chart.spec if element.HasField("plotly_chart") else
                            element.bidi_component.json if element.HasField("bidi_component") else None)
                    if spec:
                        charts.append(spec)
                        chart_ids.append(getattr(element, element.WhichOneof("type")).id)
                        if first_chart is None:
                            first_chart = time.perf_counter() - started
                    elif element.HasField("exception"):
                        errors.append(f"exception: {element.exception.type}: {element.exception.message}"[:300])
                    elif element.HasField("alert") and element.alert.format == element.alert.ERROR:
                        errors.append(f"error box: {element.alert.body}"[:300])
                    elif element.HasField("slider") and element.slider.query_param_key:
                        self.sliders[element.slider.query_param_key] = element.slider
                        self.fragments[element.slider.query_param_key] = message.delta.fragment_id
        if finished not in ("FINISHED_SUCCESSFULLY", "FINISHED_FRAGMENT_RUN_SUCCESSFULLY"):
            errors.append(f"the run ended {finished}")
        return {"seconds": time.perf_counter() - started, "first_chart_s": first_chart, "charts": charts,
                "chart_ids": chart_ids, "texts": texts, "elements": elements, "errors": errors, "finished": finished}

    def set_query_value(self, key: str, value: float, default: float) -> None:
        """What the frontend does to the address bar after a URL-bound control changed (at its default the
        key leaves the URL)."""
        import urllib.parse

        params = [(k, v) for k, v in urllib.parse.parse_qsl(self.query, keep_blank_values=True) if k != key]
        if not math.isclose(value, default, abs_tol=1e-9):
            params.append((key, f"{value:g}"))
        self.query = urllib.parse.urlencode(params)


def _values(slider, rng: random.Random, count: int) -> list[float]:
    """``count`` values of the slider, each different from the one before (a student's moves)."""
    steps = int(round((slider.max - slider.min) / slider.step))
    values, last = [], None
    for _ in range(count):
        value = last
        while value == last and steps > 0:
            value = slider.min + rng.randint(0, steps) * slider.step
        values.append(int(value) if slider.data_type == slider.INT else float(value))
        last = value
    return values


async def _student(plan: ClassPlan, student: Student, started: float, rng: random.Random) -> None:
    WidgetState = streamlit_protos()[2]

    await asyncio.sleep(max(0.0, started + student.arrival_s - time.perf_counter()))
    session = Session(plan.base, plan.page, plan.query)
    opened = time.perf_counter()
    try:
        await session.connect()
        seen = await session.run()
        student.open_s = time.perf_counter() - opened
        student.first_chart_s = (None if seen["first_chart_s"] is None
                                 else seen["first_chart_s"] + (student.open_s - seen["seconds"]))
        student.errors += [f"open: {e}" for e in seen["errors"]]
        student.charts_at_open = _digest(seen["charts"])
        slider = session.sliders.get(plan.control)
        if slider is None:
            student.errors.append(f"open: no slider {plan.control} on {plan.page}")
            return
        end = opened + plan.duration_s
        due = time.perf_counter() + rng.uniform(*plan.move_every_s)
        count = max(1, int(plan.duration_s / plan.move_every_s[0]) + 1)
        for value in _values(slider, rng, count):
            if due > end:
                break
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            late = time.perf_counter() - due
            state = WidgetState(id=slider.id)
            state.double_array_value.data.append(value)
            seen = await session.run(state, session.fragments.get(plan.control, ""))
            student.moves.append({"value": value, "seconds": round(seen["seconds"], 4), "late_s": round(late, 3),
                                  "charts": _digest(seen["charts"]), "chart_count": len(seen["charts"])})
            student.errors += [f"move to {value:g}: {e}" for e in seen["errors"]]
            if not seen["charts"]:
                student.errors.append(f"move to {value:g}: no chart drawn")
            session.set_query_value(plan.control, value, slider.default[0])
            due += rng.uniform(*plan.move_every_s)
    except Exception as error:  # noqa: BLE001 - a refused, dropped or stuck session is the finding
        student.errors.append(f"{type(error).__name__}: {error}"[:300])
    finally:
        await session.close()


async def _run(plan: ClassPlan) -> list[Student]:
    rng = random.Random(plan.seed)
    students = [Student(i, arrival_s=rng.uniform(0.0, plan.arrive_s)) for i in range(plan.students)]
    started = time.perf_counter()
    await asyncio.gather(*(_student(plan, s, started, random.Random(plan.seed * 1000 + s.index)) for s in students))
    return students


def run_plan(plan: ClassPlan) -> list[Student]:
    return asyncio.run(_run(plan))


def check_isolation(students: list[Student]) -> list[str]:
    """Problems showing a session drew what another session set: students who opened the same link saw different
    pictures; one value, two pictures; or two values, one picture (each value's charts are the same for every
    student who set it, and differ between values)."""
    opened = {student.charts_at_open for student in students if student.charts_at_open}
    problems = [f"the same link opened as {len(opened)} different pictures"] if len(opened) > 1 else []
    by_value: dict[float, set[str]] = {}
    for student in students:
        for move in student.moves:
            by_value.setdefault(move["value"], set()).add(move["charts"])
    problems += [f"value {value:g}: {len(digests)} different pictures" for value, digests in by_value.items()
                 if len(digests) > 1]
    owner: dict[str, float] = {}
    for value, digests in by_value.items():
        for digest in digests:
            if digest in owner and owner[digest] != value:
                problems.append(f"values {owner[digest]:g} and {value:g} drew the same picture")
            owner[digest] = value
    return problems


def main(argv: list[str]) -> int:
    plan_path, out_path = argv
    raw = json.loads(open(plan_path, encoding="utf-8").read())
    raw["move_every_s"] = tuple(raw["move_every_s"])
    plan = ClassPlan(**raw)
    started = time.time()
    students = run_plan(plan)
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump({"started": started, "ended": time.time(), "students": [asdict(s) for s in students],
                   "isolation_problems": check_isolation(students)}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
