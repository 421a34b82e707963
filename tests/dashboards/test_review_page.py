"""The review queue and agreement pages, driven through Streamlit's AppTest on real stores."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from streamlit.testing.v1 import AppTest

from casebase.reviewed_failures import read_failures
from compliance.review_queue import EventKind, JudgeVerdictRecord, ReviewQueue
from dashboards.resources import open_case_base
from dashboards.settings import DashboardSettings
from tests.dashboards.conftest import DB_BAD_REPLY, DB_GOOD_REPLY, NOW, escalate

ROOT = Path(__file__).resolve().parents[2]
REVIEW = ROOT / "dashboards" / "views" / "review.py"
AGREEMENT = ROOT / "dashboards" / "views" / "agreement.py"
SUBMIT = "FormSubmitter:decision-Submit decision"
ALICE = "alice@example.com"
BOB = "bob@example.com"


def page(script: Path, settings: DashboardSettings, **secrets: object) -> AppTest:
    at = AppTest.from_file(str(script), default_timeout=60)
    values = {k: v for k, v in settings.model_dump(mode="json").items() if v is not None}
    values.update(secrets)
    for key, value in values.items():
        if value is not None:
            at.secrets[key] = value
    return at


def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def metric(at: AppTest, label: str) -> str:
    return next(str(m.value) for m in at.metric if m.label == label)


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def test_an_empty_queue_says_so_and_offers_nothing_to_claim(settings: DashboardSettings, queue) -> None:
    at = page(REVIEW, settings).run()
    no_exception(at)
    assert "Nothing is waiting for review." in texts(at.info)
    assert metric(at, "Waiting") == "0"
    assert [b.label for b in at.button] == []


def test_claim_then_approve_records_the_decision_and_the_item_leaves_the_queue(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    item_id = escalate(queue)
    at = page(REVIEW, settings).run()
    no_exception(at)
    assert metric(at, "Waiting") == "1"
    assert at.dataframe[0].value["item"].tolist() == [item_id]

    at.button(key="claim_next").click().run()
    no_exception(at)
    assert at.session_state["review_item"] == item_id
    assert any("You hold this item until" in s for s in texts(at.success))
    assert DB_GOOD_REPLY in texts(at.info)  # the candidate reply is on screen
    assert queue.state(item_id).lease_holder == ALICE
    assert metric(at, "Claimed") == "1"

    at.text_area(key="decision_reason").set_value("warning and signpost present")
    at.button(key=SUBMIT).click().run()
    no_exception(at)
    assert any("decided approve" in s for s in texts(at.success))
    assert metric(at, "Waiting") == "0"
    assert "Nothing is waiting for review." in texts(at.info)
    outcome = queue.outcome(item_id)
    assert outcome.decision == "approve" and outcome.reviewers == [ALICE]
    assert outcome.reason == "warning and signpost present"
    decided = [e for e in queue.history(item_id) if e.kind is EventKind.DECIDED]
    assert [e.actor for e in decided] == [ALICE]
    assert open_case_base(settings).size == 1
    assert any("added to the case base" in s for s in texts(at.info))


def test_an_item_another_reviewer_holds_is_shown_as_taken(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    item_id = escalate(queue)
    assert queue.claim(item_id, BOB).ok
    at = page(REVIEW, settings).run()
    assert at.dataframe[0].value["taken by"].tolist() == [BOB]
    at.selectbox(key="claim_choice").set_value(item_id)
    at.button(key="claim_one").click().run()
    no_exception(at)
    assert any(f"claimed by {BOB}" in w for w in texts(at.warning))
    assert "review_item" not in at.session_state
    at.button(key="claim_next").click().run()
    assert any("no item is available" in w for w in texts(at.warning))


def test_a_rejection_needs_a_reason_code_and_becomes_a_failure(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    item_id = escalate(queue, reply=DB_BAD_REPLY)
    at = page(REVIEW, settings).run()
    at.button(key="claim_next").click().run()
    at.radio(key="decision_kind").set_value("Reject")
    at.button(key=SUBMIT).click().run()
    assert "A rejection needs at least one reason code." in texts(at.error)
    assert queue.decisions(item_id) == []

    at.multiselect(key="decision_codes").set_value(["PERSONAL_RECOMMENDATION"])
    at.text_area(key="decision_reason").set_value("tells the customer to transfer")
    at.button(key=SUBMIT).click().run()
    no_exception(at)
    assert queue.outcome(item_id).decision == "reject"
    [failure] = read_failures(settings.failures_path)
    assert failure.item_id == item_id and failure.failure.violations == ["PERSONAL_RECOMMENDATION"]


def test_an_edited_reply_is_validated_again_before_it_is_accepted(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    item_id = escalate(queue, reply=DB_BAD_REPLY)
    at = page(REVIEW, settings).run()
    at.button(key="claim_next").click().run()
    at.radio(key="decision_kind").set_value("Edit and approve")
    at.text_area(key="decision_edit").set_value(DB_BAD_REPLY + " It is what I would do.")
    at.button(key=SUBMIT).click().run()
    no_exception(at)
    [refusal] = texts(at.error)
    assert "still fails the compliance check" in refusal and "PERSONAL_RECOMMENDATION" in refusal
    assert queue.decisions(item_id) == []
    assert queue.state(item_id).lease_holder == ALICE

    at.text_area(key="decision_edit").set_value(DB_GOOD_REPLY)
    at.text_area(key="decision_reason").set_value("rewrote it as guidance")
    at.button(key=SUBMIT).click().run()
    no_exception(at)
    outcome = queue.outcome(item_id)
    assert outcome.decision == "edit_approve" and outcome.text == DB_GOOD_REPLY
    assert outcome.edited_text_passed is True


def test_without_a_configured_identity_nobody_can_claim(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    escalate(queue)
    at = page(REVIEW, settings.model_copy(update={"dev_reviewer": None})).run()
    no_exception(at)
    assert any("No reviewer identity is configured" in e for e in texts(at.sidebar.error))
    assert [b.label for b in at.button] == []
    assert len(at.text_input) == 0  # a reviewer's name is never typed in


def test_with_oidc_configured_the_login_is_required_and_its_claim_is_the_reviewer(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    item_id = escalate(queue)
    auth = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "test-cookie-secret"}
    at = page(REVIEW, settings, auth=auth)  # dev_reviewer stays set: it must be ignored
    at.user = {"is_logged_in": False}
    at.run()
    no_exception(at)
    assert [b.label for b in at.button] == ["Log in"]
    assert any("Log in with your organisation account" in i for i in texts(at.sidebar.info))

    at.user = {"is_logged_in": True, "email": "carol@example.com", "name": "Carol"}
    at.run()
    assert any("Signed in as carol@example.com" in s for s in texts(at.sidebar.success))
    at.button(key="claim_next").click().run()
    at.button(key=SUBMIT).click().run()
    no_exception(at)
    assert queue.outcome(item_id).reviewers == ["carol@example.com"]


def test_an_expired_lease_must_be_claimed_again_before_deciding(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    item_id = escalate(queue)
    at = page(REVIEW, settings).run()
    at.button(key="claim_next").click().run()
    assert queue.state(item_id).lease_holder == ALICE

    later = NOW + timedelta(seconds=settings.lease_seconds + 60)
    at.secrets["review_clock_now"] = later.isoformat()
    at.run()
    no_exception(at)
    assert any("has expired" in w for w in texts(at.warning))
    assert SUBMIT not in [b.key for b in at.button]  # no decision form without a lease
    assert metric(at, "Claimed") == "0"
    assert EventKind.LEASE_EXPIRED in [e.kind for e in queue.history(item_id)]

    at.button(key="claim_again").click().run()
    no_exception(at)
    at.button(key=SUBMIT).click().run()
    no_exception(at)
    assert queue.outcome(item_id).reviewers == [ALICE]


def test_the_agreement_page_reports_kappa_and_judge_agreement(settings: DashboardSettings, clock) -> None:
    verdict = JudgeVerdictRecord(
        judge_id="judge-1",
        vendor="anthropic",
        model="claude",
        prompt_version="v1",
        passed=False,
        confidence=0.7,
        codes=["PERSONAL_RECOMMENDATION"],
        reasoning="steers the customer",
    )
    with ReviewQueue(settings.review_queue_url, clock, double_review_rate=1.0) as queue:
        labels = [("approve", "approve"), ("reject", "reject"), ("approve", "reject"), ("reject", "reject")]
        for n, (first, second) in enumerate(labels):
            item_id = escalate(queue, reply=DB_BAD_REPLY, consultation_id=f"c-{n}", verdicts=[verdict])
            for reviewer, decision in ((ALICE, first), (BOB, second)):
                queue.claim(item_id, reviewer)
                codes = ["PERSONAL_RECOMMENDATION"] if decision == "reject" else []
                queue.decide(item_id, reviewer, decision, codes, "agreement test")
        expected = queue.agreement()
    at = page(AGREEMENT, settings).run()
    no_exception(at)
    assert metric(at, "Double-reviewed items") == "4"
    assert metric(at, "Cohen's kappa") == f"{expected.kappa:.2f}"
    table = at.dataframe[0].value
    assert "PERSONAL_RECOMMENDATION" in table["code"].tolist()
