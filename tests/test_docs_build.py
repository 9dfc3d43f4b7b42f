"""The documentation site's build script (.ci/docs_build.py), without MkDocs: a gallery image links to its full-size file,
and the site's extra stylesheet (long command lines wrap) is named in .ci/mkdocs.yml and copied in by the build."""
import importlib.util, json
from pathlib import Path

import pytest

CI = Path(__file__).resolve().parents[1] / ".ci"


@pytest.fixture
def docs_build(monkeypatch):
    pytest.importorskip("yaml")
    spec = importlib.util.spec_from_file_location("docs_build", CI / "docs_build.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


def test_gallery_images_link_to_the_full_size_file(docs_build, tmp_path, monkeypatch):
    root = tmp_path / "repo"; (root / "figures").mkdir(parents=True)
    (root / "figures" / "fig_a.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / "figures" / "fig_a.json").write_text(json.dumps({"source": "nbs/figures/fig_x.ipynb", "scale": "reduced"}))
    monkeypatch.setattr(docs_build, "ROOT", root)
    docs = tmp_path / "docs"; docs.mkdir()
    docs_build.write_gallery(docs, {"figures/fig_x.ipynb": "Figure X"})
    page = (docs / docs_build.GALLERY / "fig_x.md").read_text()
    assert "[![fig_a](fig_a.png)](fig_a.png)" in page
    assert (docs / docs_build.GALLERY / "fig_a.png").exists()


def test_extra_stylesheet_wraps_code_blocks(docs_build):
    import yaml
    cfg = yaml.safe_load((CI / "mkdocs.yml").read_text())
    assert cfg["extra_css"] == [docs_build.EXTRA_CSS]
    css = (CI / "docs_extra.css").read_text()
    assert "pre > code" in css and "white-space: pre-wrap" in css
