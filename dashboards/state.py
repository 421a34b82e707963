"""The Streamlit side of the app's plumbing: settings from secrets, the reviewer, cached resources.

Resources are cached per settings (`st.cache_resource`), so every browser session of one server
shares one queue connection pool and one compiled rule engine, and a change of settings (a test
moving the queue's fixed clock, say) gets fresh ones.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from compliance.models import Validator
from compliance.review_queue import ReviewQueue
from dashboards.identity import IdentityResolution, IdentityStatus, resolve_identity
from dashboards.resources import build_service, open_queue
from dashboards.review.revalidate import default_validator
from dashboards.review.service import ReviewService
from dashboards.settings import DashboardSettings, load_settings


def secrets() -> dict[str, Any]:
    try:
        return st.secrets.to_dict()
    except FileNotFoundError:  # no secrets file at all: environment variables only
        return {}


def current_settings() -> DashboardSettings:
    return load_settings(secrets())


def auth_configured() -> bool:
    return isinstance(secrets().get("auth"), dict)


def current_identity(settings: DashboardSettings) -> IdentityResolution:
    configured = auth_configured()
    user = st.user.to_dict() if configured else {}
    return resolve_identity(configured, user, settings.dev_reviewer)


@st.cache_resource(show_spinner=False)
def _validator() -> Validator:
    return default_validator()


@st.cache_resource(show_spinner=False)
def _service(settings_json: str) -> ReviewService:
    return build_service(DashboardSettings.model_validate_json(settings_json), validator=_validator())


@st.cache_resource(show_spinner=False)
def _queue(settings_json: str) -> ReviewQueue:
    return open_queue(DashboardSettings.model_validate_json(settings_json))


def review_service(settings: DashboardSettings) -> ReviewService:
    return _service(settings.model_dump_json())


def read_queue(settings: DashboardSettings) -> ReviewQueue:
    """The queue alone, for pages that only read it (no validator, no vector store)."""
    return _queue(settings.model_dump_json())


def identity_sidebar(identity: IdentityResolution) -> None:
    """Who is reviewing, with the login or logout button that fits."""
    with st.sidebar:
        if identity.status is IdentityStatus.SIGNED_IN:
            st.success(identity.message)
            st.button("Log out", on_click=st.logout, key="logout")
        elif identity.status is IdentityStatus.DEVELOPMENT:
            st.warning(identity.message)
        elif identity.status is IdentityStatus.LOGIN_REQUIRED:
            st.info(identity.message)
            st.button("Log in", on_click=st.login, key="login", type="primary")
        else:
            st.error(identity.message)
