"""The reference implementation's retrieval, re-implemented faithfully as a speed baseline.

joonspk-research/generative_agents, reverie/backend_server/persona/cognitive_modules/retrieve.py,
`new_retrieve`: for each focal point it collects every event and thought node (not chats, not
"idle"), sorts them by last access (ascending), gives the node at position i the recency
`recency_decay ** (i + 1)` (rank-based; with the ascending sort the *least* recently accessed node
gets the highest recency - a quirk kept here on purpose), takes the raw poignancy and the cosine
similarity of the stored embedding to the focal point's, min-max normalises each dictionary (all
equal -> 0.5), weights them 0.5 (recency), 3 (relevance) and 2 (importance), sorts every score,
keeps the top n and marks those nodes accessed now. One Python iteration and one cosine per node.

Two departures, both in the baseline's favour: embeddings are numpy rows rather than the JSON
lists the reference keeps (so `cos_sim` does not convert a 384-float list three times per node),
and the debugging `print` of every scored node is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

import numpy as np
from numpy import dot
from numpy.linalg import norm


class ConceptNode:
    __slots__ = ("created", "embedding_key", "last_accessed", "node_id", "node_type", "poignancy")

    def __init__(
        self,
        node_id: str,
        node_type: str,
        created: datetime,
        last_accessed: datetime,
        embedding_key: str,
        poignancy: int,
    ) -> None:
        self.node_id = node_id
        self.node_type = node_type
        self.created = created
        self.last_accessed = last_accessed
        self.embedding_key = embedding_key
        self.poignancy = poignancy


class AssociativeMemory:
    def __init__(self, embeddings: Mapping[str, np.ndarray]) -> None:
        self.seq_event: list[ConceptNode] = []
        self.seq_thought: list[ConceptNode] = []
        self.seq_chat: list[ConceptNode] = []
        self.id_to_node: dict[str, ConceptNode] = {}
        self.embeddings = embeddings

    def add(self, node: ConceptNode) -> None:
        {"event": self.seq_event, "thought": self.seq_thought, "chat": self.seq_chat}[node.node_type].append(
            node
        )
        self.id_to_node[node.node_id] = node


class Scratch:
    def __init__(self, curr_time: datetime) -> None:
        self.curr_time = curr_time
        self.recency_w = 1
        self.relevance_w = 1
        self.importance_w = 1
        self.recency_decay = 0.99


class Persona:
    def __init__(self, a_mem: AssociativeMemory, scratch: Scratch) -> None:
        self.a_mem = a_mem
        self.scratch = scratch


def cos_sim(a, b) -> float:
    return dot(a, b) / (norm(a) * norm(b))


def normalize_dict_floats(d: dict, target_min: float, target_max: float) -> dict:
    min_val = min(val for val in d.values())
    max_val = max(val for val in d.values())
    range_val = max_val - min_val
    if range_val == 0:
        for key in d:
            d[key] = (target_max - target_min) / 2
    else:
        for key, val in d.items():
            d[key] = (val - min_val) * (target_max - target_min) / range_val + target_min
    return d


def top_highest_x_values(d: dict, x: int) -> dict:
    return dict(sorted(d.items(), key=lambda item: item[1], reverse=True)[:x])


def extract_recency(persona: Persona, nodes: list[ConceptNode]) -> dict:
    recency_vals = [persona.scratch.recency_decay**i for i in range(1, len(nodes) + 1)]
    return {node.node_id: recency_vals[count] for count, node in enumerate(nodes)}


def extract_importance(persona: Persona, nodes: list[ConceptNode]) -> dict:
    return {node.node_id: node.poignancy for node in nodes}


def extract_relevance(persona: Persona, nodes: list[ConceptNode], focal_embedding) -> dict:
    relevance_out = {}
    for node in nodes:
        node_embedding = persona.a_mem.embeddings[node.embedding_key]
        relevance_out[node.node_id] = cos_sim(node_embedding, focal_embedding)
    return relevance_out


def new_retrieve(
    persona: Persona,
    focal_points: list[str],
    get_embedding: Callable[[str], np.ndarray],
    n_count: int = 30,
) -> dict[str, list[ConceptNode]]:
    retrieved = {}
    for focal_pt in focal_points:
        nodes = [
            [i.last_accessed, i]
            for i in persona.a_mem.seq_event + persona.a_mem.seq_thought
            if "idle" not in i.embedding_key
        ]
        nodes = sorted(nodes, key=lambda x: x[0])
        nodes = [i for created, i in nodes]

        recency_out = normalize_dict_floats(extract_recency(persona, nodes), 0, 1)
        importance_out = normalize_dict_floats(extract_importance(persona, nodes), 0, 1)
        relevance_out = normalize_dict_floats(
            extract_relevance(persona, nodes, get_embedding(focal_pt)), 0, 1
        )

        gw = [0.5, 3, 2]
        master_out = {}
        for key in recency_out:
            master_out[key] = (
                persona.scratch.recency_w * recency_out[key] * gw[0]
                + persona.scratch.relevance_w * relevance_out[key] * gw[1]
                + persona.scratch.importance_w * importance_out[key] * gw[2]
            )
        master_out = top_highest_x_values(master_out, len(master_out.keys()))
        master_out = top_highest_x_values(master_out, n_count)
        master_nodes = [persona.a_mem.id_to_node[key] for key in list(master_out.keys())]
        for n in master_nodes:
            n.last_accessed = persona.scratch.curr_time
        retrieved[focal_pt] = master_nodes
    return retrieved
