"""The review queue page: what is waiting, claiming an item, the evidence, and the decision.

Actions run as widget callbacks, before the page is drawn again, so the queue shown after a click
already reflects it; what they report is kept in session state and shown at the top of the page.
"""

from __future__ import annotations

import streamlit as st

from compliance.codes import ComplianceCode
from compliance.review_queue import ClaimResult, ItemStatus, ReviewerView
from dashboards.review.display import (
    AGE_BUCKETS,
    customer_rows,
    entry_label,
    history_rows,
    queue_filter,
    queue_rows,
    waited,
)
from dashboards.review.service import DecisionAttempt, ReviewService
from dashboards.state import current_identity, current_settings, identity_sidebar, review_service

ITEM = "review_item"  # the item this browser session is working on
FLASH = "review_flash"  # messages from the last action: [(kind, text)]
ANY = "any"
DECISIONS = {"Approve": "approve", "Reject": "reject", "Edit and approve": "edit_approve"}
CODES = [str(c) for c in ComplianceCode]


def flash(kind: str, text: str) -> None:
    st.session_state.setdefault(FLASH, []).append((kind, text))


def show_flashes() -> None:
    for kind, text in st.session_state.pop(FLASH, []):
        getattr(st, kind)(text)


def after_claim(result: ClaimResult) -> None:
    if result.ok:
        st.session_state[ITEM] = result.item_id
        flash("success", f"You hold item {result.item_id} until {result.lease_expires_at:%H:%M:%S %Z}.")
    else:
        flash("warning", result.message)


def on_claim_next(service: ReviewService, reviewer: str) -> None:
    after_claim(service.claim_next(reviewer, current_filter()))


def on_claim_selected(service: ReviewService, reviewer: str) -> None:
    item_id = st.session_state.get("claim_choice")
    if item_id:
        after_claim(service.claim(item_id, reviewer))


def on_release(service: ReviewService, item_id: str, reviewer: str) -> None:
    result = service.release(item_id, reviewer)
    flash("info" if result.ok else "warning", result.message)
    st.session_state.pop(ITEM, None)


def on_decide(service: ReviewService, item_id: str, reviewer: str) -> None:
    choice = DECISIONS[st.session_state["decision_kind"]]
    codes = list(st.session_state.get("decision_codes", []))
    reason = st.session_state.get("decision_reason", "").strip()
    if choice == "approve":
        attempt = service.approve(item_id, reviewer, reason)
    elif choice == "reject":
        if not codes:
            flash("error", "A rejection needs at least one reason code.")
            return
        attempt = service.reject(item_id, reviewer, codes, reason)
    else:
        text = st.session_state.get("decision_edit", "")
        if not text.strip():
            flash("error", "Write the edited reply before approving it.")
            return
        attempt = service.edit_and_approve(item_id, reviewer, text, reason, codes)
    report(attempt, item_id)


def report(attempt: DecisionAttempt, item_id: str) -> None:
    if attempt.result is None and attempt.edit_check is not None:
        found = "\n".join(
            f"- **{f.code}** ({f.rule_id}): {f.message.strip()}" for f in attempt.edit_check.findings
        )
        flash("error", f"The edited reply still fails the compliance check, so it was not accepted:\n{found}")
        return
    assert attempt.result is not None
    result = attempt.result
    if not result.ok:
        flash("warning" if result.status == "already_decided" else "error", result.message)
        if result.status in ("already_decided", "closed"):
            st.session_state.pop(ITEM, None)
        return
    flash("success", result.message)
    st.session_state.pop(ITEM, None)
    if result.outcome is None:
        flash("info", "This item is in the double-review sample: it stays open for a second, blind review.")
    if attempt.feedback is not None:
        for line in attempt.feedback.reports:
            flash("info", f"Learning from item {line.item_id}: {line.summary()}.")
        for log in attempt.feedback.retried:
            flash("info", f"An earlier decision reached its consultation's trace: {log.message}.")
        if attempt.feedback.error:
            flash(
                "warning",
                f"The decision is recorded, but feeding it into learning failed ({attempt.feedback.error}); "
                "it is retried after the next decision.",
            )


def current_filter():
    def pick(key: str) -> str | None:
        value = st.session_state.get(key, ANY)
        return None if value == ANY else value

    return queue_filter(
        pick("filter_code"),
        pick("filter_stage"),
        pick("filter_mode"),
        pick("filter_source"),
        st.session_state.get("filter_age", "any age"),
    )


def filters_row(stages: list[str], modes: list[str]) -> None:
    code, stage, mode, source, age = st.columns(5)
    code.selectbox("Code", [ANY, *CODES], key="filter_code")
    stage.selectbox("Stage", [ANY, *stages], key="filter_stage")
    mode.selectbox("Mode", [ANY, *modes], key="filter_mode")
    source.selectbox("Source", [ANY, "training", "live"], key="filter_source")
    age.selectbox("Waiting", list(AGE_BUCKETS), key="filter_age")


def evidence(view: ReviewerView) -> None:
    item = view.item
    payload = item.payload
    tabs = st.tabs(
        ["Reply", "Conversation", "Customer", "Retrieved", "Rule hits", "Judges", "Drafts", "History"]
    )
    with tabs[0]:
        st.markdown("**Candidate reply** (held from the customer)")
        st.info(payload.candidate_reply)
        st.caption(f"Escalated because: {item.reason}")
    with tabs[1]:
        for turn in payload.conversation:
            with st.chat_message("user" if turn.role == "customer" else "assistant"):
                st.markdown(f"**{turn.role}**: {turn.text}")
    with tabs[2]:
        st.dataframe(customer_rows(item), hide_index=True, width="stretch")
    with tabs[3]:
        for kind, records in (
            ("Cases", payload.retrieved.cases),
            ("Rules", payload.retrieved.rules),
            ("Memories", payload.retrieved.memories),
        ):
            st.markdown(f"**{kind}** ({len(records)})")
            for record in records:
                score = "" if record.score is None else f" (score {record.score:.2f})"
                with st.expander(f"{record.id}{score}"):
                    st.text(record.text)
    with tabs[4]:
        if payload.rule_hits:
            st.dataframe([h.model_dump() for h in payload.rule_hits], hide_index=True, width="stretch")
        else:
            st.caption("No deterministic rule fired on the candidate reply.")
    with tabs[5]:
        if payload.verdicts:
            st.dataframe(
                [
                    {
                        "judge": v.judge_id,
                        "vendor / model": f"{v.vendor} / {v.model}",
                        "prompt": v.prompt_version,
                        "passed": "no answer" if v.passed is None else ("yes" if v.passed else "no"),
                        "confidence": v.confidence,
                        "codes": ", ".join(v.codes),
                        "reasoning": v.reasoning or (v.error or ""),
                    }
                    for v in payload.verdicts
                ],
                hide_index=True,
                width="stretch",
            )
        else:
            st.caption("No LLM judge saw this reply (the rule stage escalated it).")
    with tabs[6]:
        for i, draft in enumerate(payload.drafts, start=1):
            verdict = (
                "compliant" if draft.compliant else ("not compliant" if draft.compliant is False else "?")
            )
            codes = f": {', '.join(draft.codes)}" if draft.codes else ""
            with st.expander(f"Draft {i} — {verdict}{codes} (decided by {draft.decided_by})"):
                st.text(draft.text)
    with tabs[7]:
        st.dataframe(history_rows(view.history), hide_index=True, width="stretch")


def decision_form(service: ReviewService, view: ReviewerView, reviewer: str) -> None:
    item = view.item
    with st.form("decision", border=True):
        st.radio("Decision", list(DECISIONS), horizontal=True, key="decision_kind")
        st.multiselect(
            "Reason codes (required to reject)",
            CODES,
            key="decision_codes",
            help="What is wrong with the reply",
        )
        st.text_area("Reason", key="decision_reason", placeholder="Why, in a sentence an auditor can follow")
        st.text_area(
            "Edited reply (for edit and approve: checked again by the validator before it is accepted)",
            value=item.payload.candidate_reply,
            key="decision_edit",
            height=180,
        )
        st.form_submit_button(
            "Submit decision", type="primary", on_click=on_decide, args=(service, item.id, reviewer)
        )


def item_panel(service: ReviewService, item_id: str, reviewer: str) -> None:
    view = service.queue.view(item_id, reviewer)
    if view is None:
        st.session_state.pop(ITEM, None)
        return
    item, state = view.item, view.state
    st.divider()
    st.subheader(f"Item {item.id}")
    st.caption(
        f"{item.source} escalation · mode {item.mode} · stage {item.stage} · risk {item.risk:.2f} · "
        f"codes {', '.join(item.codes) or 'none'} · consultation {item.consultation_id or '-'}"
        + (f" · session {item.session_id}" if item.session_id else "")
    )
    if state.status is ItemStatus.CLOSED:
        st.info("This item is closed.")
        evidence(view)
        return
    if view.blind:
        st.info("Blind second review: decide independently; the first reviewer's decision is hidden.")
    mine = any(d.reviewer == reviewer for d in view.decisions)
    if state.lease_holder == reviewer:
        left, right = st.columns([3, 1])
        left.success(f"You hold this item until {state.lease_expires_at:%H:%M:%S %Z}.")
        right.button("Release", on_click=on_release, args=(service, item.id, reviewer), key="release")
    elif mine:
        st.info("You have already decided this item; its other review must come from someone else.")
    elif state.lease_holder:
        st.error(f"Item {item.id} is now claimed by {state.lease_holder}; you no longer hold it.")
    else:
        st.warning(f"Your lease on item {item.id} has expired; claim it again to decide.")
        st.button(
            "Claim again",
            on_click=lambda: after_claim(service.claim(item.id, reviewer)),
            key="claim_again",
        )
    evidence(view)
    if state.lease_holder == reviewer:
        decision_form(service, view, reviewer)


def main() -> None:
    settings = current_settings()
    identity = current_identity(settings)
    identity_sidebar(identity)
    service = review_service(settings)
    queue = service.queue
    queue.expire_leases()  # so "taken by" and each item's history are accurate now
    reviewer = identity.reviewer.name if identity.reviewer else None

    st.title("Compliance review queue")
    show_flashes()
    everything = queue.list_open(limit=500)
    filters_row(
        sorted({e.item.stage for e in everything}),
        sorted({e.item.mode for e in everything}),
    )
    filters = current_filter()
    stats = queue.stats(filters)
    waiting, claimed, oldest, training, live = st.columns(5)
    waiting.metric("Waiting", stats.waiting)
    claimed.metric("Claimed", stats.claimed)
    oldest.metric("Oldest waited", waited(stats.oldest_age))
    training.metric("Training", stats.by_source.get("training", 0))
    live.metric("Live customers", stats.by_source.get("live", 0))
    entries = queue.list_open(filters, limit=200)
    if not entries:
        st.info(
            "Nothing is waiting for review." if stats.waiting == 0 and not everything else "No item matches."
        )
    else:
        st.dataframe(queue_rows(entries), hide_index=True, width="stretch", key="queue_table")

    if reviewer is None:
        st.caption("Claiming and deciding need a named reviewer (see the sidebar).")
        return
    if entries:
        next_col, pick_col, claim_col = st.columns([1, 3, 1], vertical_alignment="bottom")
        next_col.button(
            "Claim next", type="primary", on_click=on_claim_next, args=(service, reviewer), key="claim_next"
        )
        labels = {e.item.id: entry_label(e) for e in entries}
        pick_col.selectbox("Item", list(labels), format_func=labels.get, key="claim_choice")
        claim_col.button(
            "Claim selected", on_click=on_claim_selected, args=(service, reviewer), key="claim_one"
        )
    current = st.session_state.get(ITEM)
    if current:
        item_panel(service, current, reviewer)


main()
