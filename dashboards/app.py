"""The review and experiments app: `streamlit run dashboards/app.py`.

Settings come from `PGT_*` environment variables or top-level keys of `.streamlit/secrets.toml`
(see `dashboards.settings`); reviewers log in through Streamlit's OIDC support when the secrets
have an `[auth]` section, and otherwise act under the configured development identity.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

VIEWS = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="Pension guidance trainer", layout="wide")
page = st.navigation(
    {
        "Compliance": [
            st.Page(VIEWS / "review.py", title="Review queue", default=True),
            st.Page(VIEWS / "agreement.py", title="Agreement", url_path="agreement"),
        ],
        "Training": [
            st.Page(VIEWS / "experiments.py", title="Experiments", url_path="experiments"),
        ],
    }
)
page.run()
