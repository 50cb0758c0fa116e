"""Training and measuring inside the app under one quota per visitor, shared by every page.

Exists so that who a visitor is (a hashed cookie or address) and the guarded run (quota, server-wide slot,
time limit, progress bar) are decided in one place; relviz.app.training_queue holds the ledger itself.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import streamlit as st

from relviz.app import internals as app_internals

if TYPE_CHECKING:  # torch loads only on a page that trains or measures
    from relviz.app.training_queue import SessionTrainings

T = TypeVar("T")


SESSION_TRAININGS_KEY = "trainings"


def _hashed(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:20]


def visitor_key() -> tuple[str | None, str | None]:
    """(visitor, address): whom this session's runs count against, as Streamlit sees the client.

    visitor: the token in the browser's XSRF cookie (Streamlit sets it on the first visit; a
    reload or a new tab sends the same token again), else the client address. address: the client's IP address
    (st.context.ip_address; behind a reverse proxy on the same host, Streamlit's server takes
    it from X-Forwarded-For). Both hashed; None when unknown (a local session without cookies,
    e.g. AppTest: then the session counts alone). See docs/DEPLOY.md for what this cannot stop.
    """
    address = st.context.ip_address
    address = address if isinstance(address, str) and address else None  # (AppTest gives a mock)
    cookie = st.context.cookies.get(app_internals.XSRF_COOKIE) if st.context.cookies else None
    cookie = cookie if isinstance(cookie, str) and cookie else None
    visitor = f"cookie:{_hashed(app_internals.xsrf_token(cookie))}" if cookie else (f"ip:{_hashed(address)}" if address else None)
    return visitor, (_hashed(address) if address else None)


def session_trainings() -> SessionTrainings:
    """This browser session's trained models, its runs counted per visitor across reloads
    (relviz.app.training_queue's quota, in the server-wide ledger)."""
    from relviz.app.training_queue import LEDGER, SessionTrainings  # loads torch (TYPE_CHECKING above)

    if SESSION_TRAININGS_KEY not in st.session_state:
        visitor, address = visitor_key()
        st.session_state[SESSION_TRAININGS_KEY] = SessionTrainings(visitor=visitor, address=address, ledger=LEDGER)
    return st.session_state[SESSION_TRAININGS_KEY]


def run_guarded(run: Callable[[Callable[[float, str], None]], T]) -> T | None:
    """Run ``run(report)`` inside the training guard (session quota, one server-wide slot, one
    thread, time limit) with a progress bar; a refusal or timeout becomes an st.error and None."""
    # loads torch (TYPE_CHECKING above)
    from relviz.app.training_queue import TrainingBusy, TrainingTimeout, guarded_run

    bar = st.progress(0.0, text="starting…")
    try:
        with guarded_run(session_trainings()) as check_time:
            def report(fraction: float, text: str) -> None:
                check_time()
                bar.progress(min(1.0, max(0.0, fraction)), text=text)

            return run(report)
    except (ValueError, TrainingBusy, TrainingTimeout) as error:
        bar.empty()
        st.error(str(error), icon=":material/block:")
        return None
