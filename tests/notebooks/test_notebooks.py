"""Each notebook of notebooks/ runs from top to bottom on a real shared trace, with small
parameters injected after its `parameters` cell (papermill's convention), and its own asserts
on its numbers pass. Notebooks are stored without outputs."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import SHARED, require_shared
from tests.notebooks.nbrun import NB_DIR, outputs_text, run_notebook

pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = ["http_analysis", "accuracy_vs_tshark", "load_balancing", "url_filtering", "tls_analysis"]
#: a different trace than the notebooks' default, so the injection is what is run
SMALL_TRACE = SHARED / "traces" / "elcabezzonn-pcaps" / "aug16_part2.pcap.gz"

PARAMS = {
    "http_analysis": {"TOP": 5, "TIME_BINS": 20},
    "accuracy_vs_tshark": {},
    "load_balancing": {"CONSUMERS": [2, 4, 8], "BINS": 16},
    "url_filtering": {"BLACKLIST_CATEGORIES": ["publicite"], "TREE_URLS": 20000, "STAGE_N": 500,
                      "STAGE_ROUNDS": 1},
    "tls_analysis": {"TOP": 5},
}


def test_notebooks_stored_without_outputs_and_with_a_parameters_cell():
    for name in NOTEBOOKS:
        nb = json.loads((NB_DIR / f"{name}.ipynb").read_text(encoding="utf-8"))
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(c.get("outputs") == [] and c.get("execution_count") is None for c in code), name
        params = [c for c in code if "parameters" in c["metadata"].get("tags", [])]
        assert len(params) == 1 and "TRACE = " in "".join(params[0]["source"]), name


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name):
    require_shared(SMALL_TRACE)
    if name == "accuracy_vs_tshark" and shutil.which("tshark") is None:
        pytest.skip("tshark not on PATH")
    nb = run_notebook(name, {"TRACE": str(SMALL_TRACE), **PARAMS[name]}, timeout=240)
    pngs = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    expected = {"http_analysis": 10, "accuracy_vs_tshark": 4, "load_balancing": 4, "url_filtering": 6,
                "tls_analysis": 8}   # tls_analysis: 6 handshake figures + 2 exchange CCDFs (issue 33)
    assert pngs >= expected[name], (name, pngs)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    text = outputs_text(nb)
    if name == "http_analysis":
        # aug16_part2: the injected trace was analysed, not the default one
        assert "aug16" in "".join(c.source for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
        assert "records" in text
