"""Domain-free generative-agent machinery: LLM and embedding clients, memory, retrieval, planning.

Nothing in this package knows about pensions; the pension advisor is assembled in `environments`.
"""

from pathlib import Path

# The prompt templates of simulacra's own tasks (importance, reflection, planning, agent).
PROMPTS_DIR = Path(__file__).parent / "prompts"
