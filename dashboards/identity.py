"""Who is reviewing: the OIDC login when auth is configured, a named development identity otherwise.

A decision is only as accountable as the name on it, so the name never comes from a text box the
reviewer types into. With an `[auth]` section in Streamlit's secrets the reviewer must log in and
the identity provider's claim is used; the development identity is then ignored, so a deployment
cannot fall back to it. Without auth, the name comes from config (`PGT_DEV_REVIEWER` or the
secret `dev_reviewer`) and is shown as a development identity; with neither, nobody may decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

# Claims tried in order: a stable, human-readable name is what an auditor needs.
IDENTITY_CLAIMS = ("email", "preferred_username", "sub")


class IdentitySource(StrEnum):
    OIDC = "oidc"
    DEVELOPMENT = "development"


class IdentityStatus(StrEnum):
    SIGNED_IN = "signed_in"  # OIDC login
    DEVELOPMENT = "development"  # named in config, auth not configured
    LOGIN_REQUIRED = "login_required"  # auth configured, not logged in
    MISSING = "missing"  # nothing configured, or the login carried no usable claim


class Reviewer(BaseModel):
    name: str
    source: IdentitySource
    display_name: str = ""


class IdentityResolution(BaseModel):
    status: IdentityStatus
    reviewer: Reviewer | None = None
    message: str

    @property
    def may_decide(self) -> bool:
        return self.reviewer is not None


def resolve_identity(
    auth_configured: bool, user: Mapping[str, Any], dev_reviewer: str | None
) -> IdentityResolution:
    """Decide who the reviewer is from the auth config, Streamlit's `st.user` and the dev identity."""
    if auth_configured:
        if not user.get("is_logged_in"):
            return IdentityResolution(
                status=IdentityStatus.LOGIN_REQUIRED,
                message="Log in with your organisation account to review items.",
            )
        for claim in IDENTITY_CLAIMS:
            value = user.get(claim)
            if isinstance(value, str) and value.strip() and len(value) <= 128:
                display = user.get("name")
                return IdentityResolution(
                    status=IdentityStatus.SIGNED_IN,
                    reviewer=Reviewer(
                        name=value.strip(),
                        source=IdentitySource.OIDC,
                        display_name=display if isinstance(display, str) else "",
                    ),
                    message=f"Signed in as {value.strip()}.",
                )
        return IdentityResolution(
            status=IdentityStatus.MISSING,
            message="The identity provider returned no email, preferred_username or sub claim; "
            "decisions need a named reviewer.",
        )
    if dev_reviewer:
        return IdentityResolution(
            status=IdentityStatus.DEVELOPMENT,
            reviewer=Reviewer(name=dev_reviewer, source=IdentitySource.DEVELOPMENT),
            message=f"Development identity {dev_reviewer} (from config; configure OIDC login for real use).",
        )
    return IdentityResolution(
        status=IdentityStatus.MISSING,
        message="No reviewer identity is configured. Configure OIDC login ([auth] in "
        ".streamlit/secrets.toml) or, for development, set PGT_DEV_REVIEWER (or the secret dev_reviewer).",
    )
