"""Agreement: reviewer against reviewer (blind double reviews) and judges against the human."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboards.state import current_identity, current_settings, identity_sidebar, read_queue

EDIT_AS = {
    "as a rejection of the reply as written": "reject",
    "as an approval": "approve",
}


def main() -> None:
    settings = current_settings()
    identity_sidebar(current_identity(settings))
    queue = read_queue(settings)
    st.title("Reviewer and judge agreement")
    left, right = st.columns(2)
    source_label = left.selectbox("Items", ["all", "training", "live"], key="agreement_source")
    edit_label = right.selectbox("Count an edit-and-approve", list(EDIT_AS), key="agreement_edit")
    source = None if source_label == "all" else source_label
    edit_as = EDIT_AS[edit_label]

    st.subheader("Reviewer against reviewer")
    kappa = queue.agreement(edit_approve_as=edit_as, source=source)
    a, b, c = st.columns(3)
    a.metric("Double-reviewed items", kappa.items)
    b.metric("Observed agreement", "-" if kappa.observed is None else f"{kappa.observed:.0%}")
    c.metric("Cohen's kappa", "-" if kappa.kappa is None else f"{kappa.kappa:.2f}")
    if kappa.items == 0:
        st.caption("No item of the blind double-review sample has had both reviews yet.")
    elif kappa.kappa is None:
        st.caption("Kappa is undefined: both reviewers gave one and the same label to every item.")

    st.subheader("Judges against the human decision, by code")
    rows = queue.judge_agreement(edit_approve_as=edit_as, source=source)
    if not rows:
        st.caption("No closed item carries a judge verdict yet (rule-stage escalations have none).")
        return
    table = pd.DataFrame([r.model_dump() for r in rows])
    st.dataframe(table, hide_index=True, width="stretch")
    chart = (
        alt.Chart(table.dropna(subset=["rate"]))
        .mark_bar()
        .encode(
            x=alt.X("rate:Q", title="judge-human agreement", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("code:N", sort="-x", title=None),
            tooltip=["code", "comparisons", "matches", "judge_flagged", "human_flagged"],
        )
    )
    st.altair_chart(chart, width="stretch")


main()
