"""Building the review app's parts from its settings, without Streamlit (the pages cache these).

The library's embedder must be the one that filled it, so it is named in the settings exactly as
in the training config (`embedder=hashing|minilm|openai`, with its dimension).
"""

from __future__ import annotations

from casebase import CasebaseConfig, StoreConfig, open_bases
from casebase.case_base import CaseBase
from compliance.models import Validator
from compliance.review_queue import ReviewQueue
from dashboards.clock import review_clock
from dashboards.review.assessments import HumanAssessmentLogger
from dashboards.review.feedback import CursorFile, FeedbackPump
from dashboards.review.revalidate import default_validator
from dashboards.review.service import ReviewService
from dashboards.settings import DashboardSettings
from simulacra.embeddings.base import Embedder
from simulacra.embeddings.factory import build_embedder


def open_queue(settings: DashboardSettings) -> ReviewQueue:
    return ReviewQueue(settings.review_queue_url, review_clock(settings))


def library_embedder(settings: DashboardSettings) -> Embedder:
    if settings.embedder == "hashing":
        return build_embedder("hashing", dimension=settings.embedder_dimension)
    if settings.embedder == "minilm":
        return build_embedder("minilm")
    return build_embedder("openai", dimensions=settings.embedder_dimension)


def open_case_base(settings: DashboardSettings) -> CaseBase:
    store = StoreConfig(path=settings.casebase_path, host=settings.casebase_host, port=settings.casebase_port)
    # Human-validated cases are stamped with the time the reviewer decided, in real time.
    return open_bases(CasebaseConfig(store=store), library_embedder(settings), review_clock(settings)).cases


def build_pump(settings: DashboardSettings, queue: ReviewQueue, validator: Validator) -> FeedbackPump:
    return FeedbackPump(
        queue,
        open_case_base(settings),
        settings.failures_path,
        CursorFile(settings.feedback_cursor_path),
        validator,
        HumanAssessmentLogger(settings.tracking_uri, settings.trace_experiment_names),
    )


def build_service(
    settings: DashboardSettings, queue: ReviewQueue | None = None, validator: Validator | None = None
) -> ReviewService:
    """The service (with its own queue and validator unless given); the pump is built when the first
    item closes."""
    queue = queue or open_queue(settings)
    validator = validator or default_validator()
    pump: list[FeedbackPump] = []

    def feedback() -> FeedbackPump:
        if not pump:
            pump.append(build_pump(settings, queue, validator))
        return pump[0]

    return ReviewService(queue, validator, settings.lease_seconds, feedback)
