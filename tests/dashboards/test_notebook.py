"""The walkthrough notebook runs top to bottom: CI executes it and fails if any cell fails."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "walkthrough.ipynb"


def test_the_walkthrough_notebook_executes_without_error() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # Raises CellExecutionError, naming the cell, if any cell fails.
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the learning curve was drawn
