"""Scripted-provider handlers for the pension world's tasks (advisor, customer).

They compute answers from the call's structured variables, make the configured mistakes at the
configured rates, and avoid a mistake when a retrieved rule or case that addresses it is followed
(with the configured obedience), so that learning shows up offline.
"""

from __future__ import annotations

from environments.scripted.advisor import handle_advisor_refine, handle_advisor_reply
from environments.scripted.customer import (
    handle_customer_quiz,
    handle_customer_rating,
    handle_customer_reply,
)
from environments.tasks import ADVISOR_REFINE, ADVISOR_REPLY, CUSTOMER_QUIZ, CUSTOMER_RATING, CUSTOMER_REPLY
from simulacra.llm.providers.scripted import ScriptedHandlers


def register_pension_handlers(handlers: ScriptedHandlers) -> None:
    handlers.register(ADVISOR_REPLY.name, handle_advisor_reply)
    handlers.register(ADVISOR_REFINE.name, handle_advisor_refine)
    handlers.register(CUSTOMER_REPLY.name, handle_customer_reply)
    handlers.register(CUSTOMER_RATING.name, handle_customer_rating)
    handlers.register(CUSTOMER_QUIZ.name, handle_customer_quiz)
