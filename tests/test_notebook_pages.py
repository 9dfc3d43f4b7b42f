"""Every documentation page opens with its title: in each notebook of nbs/ the `# Title` markdown cell (with its `> summary`)
is the first cell, or the second after a `#| default_exp` cell, so that no import cell stands above the title on the site.
The summary is plain text (the page header shows it as it is): no LaTeX and no `V_k` in it."""
import json, re
from pathlib import Path

import pytest

NBS = Path(__file__).resolve().parents[1] / "nbs"
NOTEBOOKS = sorted(p for p in NBS.rglob("*.ipynb") if not any(q.startswith((".", "_")) for q in p.relative_to(NBS).parts))


def _src(cell) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(NBS)))
def test_the_title_comes_first(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    first = 1 if cells and cells[0]["cell_type"] == "code" and _src(cells[0]).lstrip().startswith("#| default_exp") else 0
    assert cells[first]["cell_type"] == "markdown" and re.match(r"#\s+\S", _src(cells[first])), \
        f"cell {first} of {path.name} is not the '# Title' markdown cell"
    summary = [l for l in _src(cells[first]).splitlines() if l.startswith(">")]
    assert not any("$" in l or re.search(r"\bV_", l) for l in summary), summary  # write Vₖ, not V_k or $V_k$
