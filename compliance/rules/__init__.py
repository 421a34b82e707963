"""Stage 1 of the hybrid validator: deterministic rules, one small module per family.

Each rule has an id, the compliance code it reports and the source of the obligation; its
vocabulary (phrases, figures, thresholds) comes from the knowledge base.
"""

from compliance.rules.base import Analysis, BaseRule, Rule
from compliance.rules.engine import RuleEngine, default_rules
from compliance.rules.topics import Topics

__all__ = ["Analysis", "BaseRule", "Rule", "RuleEngine", "Topics", "default_rules"]
