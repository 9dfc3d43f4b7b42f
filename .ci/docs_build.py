"""Build the documentation site into `_docs/` with MkDocs (no quarto), from the notebooks' committed outputs.

Prepares a temporary docs_dir:
- every notebook of `nbs/` (same folders, `nbs/index.ipynb` as the home page), cleaned the way nbdev renders them:
  cells whose first line is `#| hide` (or `#| include: false`) and the `#| default_exp` cell are dropped,
  `#| ...` directive lines are stripped from the other code cells, `#| echo: false` hides the input and
  `#| output: false` the outputs; notebooks are never executed;
- one figure page per figure notebook: each `figures/*.png` (a link to the full-size file) with its JSON configuration
  as the caption, the tables (`figures/*.md`) as pages, and the other figure files (CSV, HTML reports) as downloads;
- one API page per module of `achilles/` (mkdocstrings, read statically from the source: nothing is imported);
then adds `docs_dir` and `nav` to `.ci/mkdocs.yml` (and `.ci/docs_extra.css` as the site's extra stylesheet), runs
`mkdocs build`, and copies MathJax 2 from the django-static-mathjax wheel into the site (math renders offline).

Usage: python .ci/docs_build.py [--site-dir _docs] [--keep]
"""
from __future__ import annotations

import argparse, json, os, re, shutil, subprocess, sys, tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {  # nbs/ folder -> section title, in the order of the layers
    "00_core": "Core", "10_kernels": "Kernels", "20_generators": "Generators", "30_attacks": "Attacks",
    "35_nobox": "No-box metrics", "40_experiments": "Experiments", "50_perf": "Performance", "figures": "Figure notebooks",
}
DIRECTIVE = re.compile(r"^\s*#\s?\|\s*(.*?)\s*$")
GALLERY = "gallery"  # site folder of the figure pages (nbs/figures already owns `figures/`)
MATHJAX = "assets/mathjax"
EXTRA_CSS = "assets/extra.css"  # `.ci/docs_extra.css`, named by `extra_css` in `.ci/mkdocs.yml`
# MathJax 3 (the `tex-svg` component: math drawn as SVG, no font files) from the django-static-mathjax wheel. nbconvert
# writes a MathJax 2 configuration block, which MathJax 3 ignores: this is the same configuration in MathJax 3's form.
MATHJAX_CONFIG = ('<script>window.MathJax = {tex: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], '
                  'displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]], processEscapes: true, processEnvironments: true, '
                  'tags: "ams"}, svg: {fontCache: "global"}};</script>\n')


def _src(cell) -> str:
    s = cell.get("source", "")
    return s if isinstance(s, str) else "".join(s)


def _directives(src: str) -> list[str]:
    out = []
    for line in src.splitlines():
        m = DIRECTIVE.match(line)
        if m: out.append(m.group(1).lower().replace(" ", ""))
        elif line.strip(): break  # directives come first in a cell
    return out


def clean_notebook(nb: dict) -> dict:
    "The notebook as nbdev renders it: hidden cells and directive lines removed, committed outputs kept."
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            cells.append(cell); continue
        src = _src(cell)
        ds = _directives(src)
        if not ds and src.lstrip().startswith("#|"): ds = ["?"]
        if ds and ds[0] == "hide": continue
        if "include:false" in ds or any(d.startswith("default_exp") for d in ds): continue
        cell = dict(cell)
        cell["source"] = "\n".join(l for l in src.splitlines() if not DIRECTIVE.match(l)).strip("\n")
        if "output:false" in ds: cell["outputs"] = []
        if "echo:false" in ds:
            cell["metadata"] = {**cell.get("metadata", {}), "tags": ["nbdev-echo-false"]}
        if not cell["source"].strip() and not cell.get("outputs"): continue
        cells.append(cell)
    return {**nb, "cells": cells}


def notebook_title(nb: dict, default: str) -> str:
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            m = re.search(r"^#\s+(.+)$", _src(cell), re.M)
            if m: return m.group(1).strip()
    return default


def write_notebooks(docs: Path) -> tuple[list, dict]:
    "Copies the cleaned notebooks; returns the nav section per layer and {nbs-relative path: title}."
    nbs = ROOT / "nbs"
    titles, sections = {}, []
    for p in sorted(nbs.rglob("*.ipynb")):
        rel = p.relative_to(nbs)
        if any(part.startswith((".", "_")) for part in rel.parts): continue
        nb = json.loads(p.read_text(encoding="utf-8"))
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(json.dumps(clean_notebook(nb)), encoding="utf-8")
        titles[rel.as_posix()] = notebook_title(nb, p.stem)
    for folder, name in LAYERS.items():
        pages = [{titles[k]: k} for k in titles if k.startswith(folder + "/")]
        if pages: sections.append({name: pages})
    unknown = sorted({k.split("/")[0] for k in titles if "/" in k} - set(LAYERS))
    for folder in unknown:  # a new layer folder still gets its pages
        sections.append({folder: [{titles[k]: k} for k in titles if k.startswith(folder + "/")]})
    return sections, titles


def _figure_caption(cfg: dict, titles: dict) -> str:
    src = str(cfg.get("source", ""))
    rel = src[len("nbs/"):] if src.startswith("nbs/") else src
    bits = []
    if cfg.get("scale"): bits.append(f"scale: **{cfg['scale']}**")
    if rel in titles: bits.append(f"made by [{titles[rel]}](../{rel})")
    elif src: bits.append(f"made by `{src}`")
    return "; ".join(bits)


def write_gallery(docs: Path, titles: dict) -> list:
    "Figure pages, one per source notebook, each figure with its JSON configuration; tables as pages."
    figs, out = ROOT / "figures", docs / GALLERY
    out.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list] = {}
    for png in sorted(figs.glob("*.png")):
        shutil.copy2(png, out / png.name)
        cfg_path = png.with_suffix(".json")
        cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.exists() else {}
        src = str(cfg.get("source", "")); rel = src[len("nbs/"):] if src.startswith("nbs/") else ""
        groups.setdefault(rel if rel in titles else "", []).append((png, cfg))
    nav, index = [], ["# Figures", "", "Every figure of `figures/`, grouped by the notebook that makes it, with the "
                      "configuration it was made with (its JSON file) as the caption.", ""]
    for key in sorted(groups, key=lambda k: (k == "", k)):
        stem = Path(key).stem if key else "other"
        title = titles[key] if key else "Other figures"
        lines = [f"# {title}", ""]
        if key: lines += [f"Made by the notebook [{title}](../{key}).", ""]
        for png, cfg in groups[key]:
            lines += [f"## {png.stem}", "", f"[![{png.stem}]({png.name})]({png.name})", ""]  # the image links to its full size
            cap = _figure_caption(cfg, titles) if not key else (f"scale: **{cfg['scale']}**" if cfg.get("scale") else "")
            if cap: lines += [cap, ""]
            if cfg:
                lines += [f'??? note "Configuration ({png.stem}.json)"', "    ```json"]
                lines += ["    " + l for l in json.dumps(cfg, indent=2).splitlines()]
                lines += ["    ```", ""]
        (out / f"{stem}.md").write_text("\n".join(lines), encoding="utf-8")
        nav.append({title: f"{GALLERY}/{stem}.md"})
        index.append(f"- [{title}]({stem}.md): {len(groups[key])} figure{'s' * (len(groups[key]) != 1)}")
    tables = sorted(figs.glob("*.md"))
    if tables:
        (out / "tables").mkdir(exist_ok=True)
        tnav = []
        for t in tables:
            text = t.read_text(encoding="utf-8")
            if not text.lstrip().startswith("# "): text = f"# {t.stem}\n\n{text}"
            (out / "tables" / t.name).write_text(text, encoding="utf-8")
            tnav.append({re.search(r"^#\s+(.+)$", text, re.M).group(1).strip(): f"{GALLERY}/tables/{t.name}"})
        nav.append({"Tables": tnav})
        index += ["", "## Tables", ""] + [f"- [{list(d)[0]}](tables/{Path(list(d.values())[0]).name})" for d in tnav]
    others = sorted(p for p in figs.iterdir() if p.suffix in (".csv", ".html"))
    if others:
        (out / "files").mkdir(exist_ok=True)
        index += ["", "## Data and reports", ""]
        for p in others:
            shutil.copy2(p, out / "files" / p.name)
            index.append(f"- [{p.name}](files/{p.name})")
    (out / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    return [{"Figures": [f"{GALLERY}/index.md"] + nav}]


def write_api(docs: Path) -> list:
    "One mkdocstrings page per module of the package (private modules and _modidx left out)."
    pkg = ROOT / "achilles"
    out, groups = docs / "api", {}
    for p in sorted(pkg.rglob("*.py")):
        rel = p.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            if p.read_text(encoding="utf-8").count("\n") < 3 and len(parts) > 1: continue  # empty package init
        if any(x.startswith("_") for x in parts): continue
        mod = ".".join(parts)
        page = out / f"{mod}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"::: {mod}\n", encoding="utf-8")  # the module's heading is the page's title (level 1)
        group = parts[1] if len(parts) > 2 or (len(parts) == 2 and (pkg / parts[1]).is_dir()) else "achilles"
        groups.setdefault(group, []).append({mod: f"api/{mod}.md"})
    index = ["# API reference", "", "The public functions and classes of every module, from their docstrings "
             "(the notebooks hold the same code with its prose, examples and tests).", ""]
    index += [f"- [`{list(d)[0]}`]({Path(list(d.values())[0]).name})" for g in groups.values() for d in g]
    (out / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    nav = [{"API reference": ["api/index.md"] + [{g: pages} if len(pages) > 1 else pages[0]
                                                  for g, pages in groups.items()]}]
    return nav


def relative_mathjax(site: Path) -> int:
    "Copies MathJax into the site and points every page at it by a relative path; returns the pages changed."
    import mathjax  # django-static-mathjax: MathJax's own release files, in a wheel
    shutil.copytree(Path(mathjax.__file__).parent / "static" / "mathjax" / "es5", site / MATHJAX, dirs_exist_ok=True)
    n = 0
    for html in site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        if "@MATHJAX@" not in text: continue
        up = os.path.relpath(site / MATHJAX, html.parent).replace(os.sep, "/")
        text = text.replace('<script src="@MATHJAX@', MATHJAX_CONFIG + '<script src="@MATHJAX@', 1)
        html.write_text(text.replace("@MATHJAX@", up), encoding="utf-8")
        n += 1
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site-dir", default=str(ROOT / "_docs"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary docs_dir and print where it is")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="achilles-docs-"))
    docs = tmp / "docs"; docs.mkdir()
    try:
        sections, titles = write_notebooks(docs)
        if "index.ipynb" not in titles: raise SystemExit("nbs/index.ipynb (the home page) is missing")
        nav = [{"Home": "index.ipynb"}] + sections + write_gallery(docs, titles) + write_api(docs)
        (docs / EXTRA_CSS).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / ".ci" / "docs_extra.css", docs / EXTRA_CSS)
        cfg = yaml.safe_load((ROOT / ".ci" / "mkdocs.yml").read_text(encoding="utf-8"))
        cfg["docs_dir"] = str(docs)
        cfg["nav"] = nav
        for plugin in cfg["plugins"]:
            if isinstance(plugin, dict) and "mkdocstrings" in plugin:
                plugin["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT)]
        (tmp / "mkdocs.yml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        site = Path(args.site_dir).resolve()
        cmd = [sys.executable, "-m", "mkdocs", "build", "--clean", "-f", str(tmp / "mkdocs.yml"), "-d", str(site)]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=tmp)
        n = relative_mathjax(site)
        print(f"docs: {len(titles)} notebooks, MathJax linked from {n} pages; site in {site}")
    finally:
        if args.keep: print(f"docs_dir kept in {docs}")
        else: shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
