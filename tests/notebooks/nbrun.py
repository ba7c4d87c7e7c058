"""Execute a notebook of notebooks/ with injected parameters (papermill's way: a cell after the
one tagged `parameters`), in a kernel of this interpreter, from the notebooks/ folder."""
from __future__ import annotations

import pathlib
import sys

NB_DIR = pathlib.Path(__file__).resolve().parents[2] / "notebooks"


def run_notebook(name: str, params: dict | None = None, timeout: int = 300):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)
    if params:
        idx = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
        src = "# Injected parameters\n" + "\n".join(f"{k} = {v!r}" for k, v in params.items())
        cell = nbformat.v4.new_code_cell(src)
        cell.metadata["tags"] = ["injected-parameters"]
        nb.cells.insert(idx + 1, cell)
    # kernel "python3": jupyter_client starts it with sys.executable (this venv's python), so
    # the notebook imports the same build as the tests
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(NB_DIR)}})
    client.execute()
    return nb


def outputs_text(nb) -> str:
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            if "text" in o:
                out.append(o["text"])
            elif "data" in o and "text/plain" in o["data"]:
                out.append(o["data"]["text/plain"])
    return "\n".join(out)


if __name__ == "__main__":
    nb = run_notebook(sys.argv[1])
    print(outputs_text(nb))
