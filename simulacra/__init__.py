"""Domain-free generative-agent machinery: LLM and embedding clients, memory, retrieval, planning.

Nothing in this package knows about pensions; the pension advisor is assembled in `environments`.
"""
