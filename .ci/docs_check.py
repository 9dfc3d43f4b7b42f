"""Check the built site in headless Chromium: serve it on localhost, load every page, and fail on console messages
(errors, "Uncaught" exceptions, failed loads), broken internal links, missing images, resources fetched from other
hosts (the site must work offline) and any request the server answered with an error; then take the screenshots.

Usage: python .ci/docs_check.py SITE_DIR --screenshots DIR [--figure-page URL_PATH] [--jobs N]
"""
from __future__ import annotations

import argparse, os, re, shutil, socket, subprocess, sys, tempfile, time, urllib.error, urllib.request
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

CHROMIUM = os.environ.get("CHROMIUM", "chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0", "--hide-scrollbars",
         "--virtual-time-budget=8000", "--no-first-run", "--disable-extensions"]
SKIP = ("#", "mailto:", "javascript:", "data:", "blob:", "about:")
LOADED_RELS = {"stylesheet", "icon", "preload", "modulepreload", "prefetch", "manifest"}  # <link>s the browser fetches
RESOURCE_TAGS = {"img", "script", "link", "iframe", "source", "video", "audio", "embed"}


class Refs(HTMLParser):
    "Every href/src of a page, as (tag, attribute, value)."
    def __init__(self):
        super().__init__(); self.refs = []; self.math = 0
    def handle_starttag(self, tag, attrs):
        d = dict(attrs)
        for a in ("href", "src"):
            if d.get(a): self.refs.append((tag, a, d[a].strip(), (d.get("rel") or "").lower()))
        if "MathJax" in (d.get("class") or "").split(): self.math += 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def chromium(args: list[str], profile: Path, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=timeout)


def console_lines(stderr: str) -> list[str]:
    "Chromium's console messages (every level prints as INFO:CONSOLE here, so every one counts); D-Bus noise is not one."
    return [l.split("] ", 1)[-1] for l in stderr.splitlines() if ":CONSOLE" in l or "Uncaught" in l]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site")
    ap.add_argument("--screenshots", required=True, help="folder for docs_home_screenshot.png and docs_figure_page_screenshot.png")
    ap.add_argument("--figure-page", default="gallery/fig4_privbayes/", help="URL path of the figure page to screenshot")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="check only the pages whose path contains this (a quick look)")
    args = ap.parse_args(argv)
    site = Path(args.site).resolve()
    if not (site / "index.html").exists(): raise SystemExit(f"{site} has no index.html: build the site first")
    pages = sorted(p for p in site.rglob("*.html")
                   if not p.relative_to(site).as_posix().startswith("assets/") and p.name != "404.html"
                   and args.only in p.relative_to(site).as_posix())
    port = free_port(); base = f"http://127.0.0.1:{port}/"
    tmp = Path(tempfile.mkdtemp(prefix="achilles-docs-check-"))
    log = open(tmp / "server.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(site)], stdout=log, stderr=subprocess.STDOUT)
    failures: list[str] = []
    try:
        for _ in range(100):
            try: urllib.request.urlopen(base, timeout=2).close(); break
            except OSError: time.sleep(0.1)
        else: raise SystemExit(f"the server on {base} did not start")
        print(f"serving {site} on {base}; checking {len(pages)} pages in headless Chromium", flush=True)

        def url_of(p: Path) -> str:
            rel = p.relative_to(site).as_posix()
            return base + (rel[: -len("index.html")] if rel.endswith("index.html") else rel)

        def load(i_p):
            i, p = i_p
            url = url_of(p)
            profile = tmp / f"profile{i}"  # one per load: two browsers never share a profile (exit 21: in use)
            for _attempt in range(2):
                r = chromium(["--dump-dom", url], profile)
                if r.returncode == 0: break
            shutil.rmtree(profile, ignore_errors=True)
            return url, r

        status_cache: dict[str, int] = {}
        def status(u: str) -> int:
            if u not in status_cache:
                try:
                    with urllib.request.urlopen(u, timeout=10) as r: status_cache[u] = r.status
                except urllib.error.HTTPError as e: status_cache[u] = e.code
                except OSError: status_cache[u] = -1
            return status_cache[u]

        n_links = n_images = n_math = 0; external_links = set()
        with ThreadPoolExecutor(args.jobs) as pool:
            for url, r in pool.map(load, enumerate(pages)):
                page = url[len(base) - 1:]
                if r.returncode != 0 or "<html" not in r.stdout:
                    failures.append(f"{page}: chromium failed (exit {r.returncode})"); continue
                for line in console_lines(r.stderr):
                    failures.append(f"{page}: console: {line}")
                parser = Refs(); parser.feed(r.stdout)
                n_math += parser.math > 0
                for tag, attr, value, rel in parser.refs:
                    if value.startswith(SKIP): continue
                    target = urljoin(url, value); parsed = urlparse(target)
                    if parsed.netloc != f"127.0.0.1:{port}":
                        if tag in RESOURCE_TAGS and not (tag == "link" and not set(rel.split()) & LOADED_RELS):
                            failures.append(f"{page}: <{tag} {attr}={value!r}> loads from another host (the site must work offline)")
                        else: external_links.add(target)
                        continue
                    target = target.split("#", 1)[0]
                    if tag == "img": n_images += 1
                    else: n_links += 1
                    code = status(target)
                    if code != 200:
                        what = "missing image" if tag == "img" else "broken link"
                        failures.append(f"{page}: {what} <{tag} {attr}={value!r}> -> {unquote(urlparse(target).path)} ({code})")
                print(".", end="", flush=True)
        print()
        shots = Path(args.screenshots); shots.mkdir(parents=True, exist_ok=True)
        for name, path in (("docs_home_screenshot.png", ""), ("docs_figure_page_screenshot.png", args.figure_page)):
            if status(base + path) != 200: failures.append(f"screenshot page /{path} does not exist"); continue
            out = shots / name
            r = chromium([f"--screenshot={out}", "--window-size=1280,2000", base + path], tmp / "profile-shot")
            if r.returncode != 0 or not out.exists(): failures.append(f"screenshot of /{path} failed (exit {r.returncode})")
            else: print(f"screenshot of /{path}: {out} ({out.stat().st_size // 1024} KiB)")
    finally:
        server.terminate(); server.wait(10); log.close()
    served_errors = [l.strip() for l in (tmp / "server.log").read_text().splitlines()
                     if re.search(r'" (4\d\d|5\d\d) ', l) and "GET /favicon.ico " not in l]  # the browser's own guess
    failures += [f"server answered an error: {l}" for l in served_errors]
    print(f"pages loaded: {len(pages)}; internal links checked: {n_links} ({len(status_cache)} distinct targets); "
          f"images checked: {n_images}; pages with typeset math: {n_math}; external links (not followed): {len(external_links)}")
    shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"\n{len(failures)} failure(s):", file=sys.stderr)
        for f in failures[:200]: print("  " + f, file=sys.stderr)
        if len(failures) > 200: print(f"  ... and {len(failures) - 200} more", file=sys.stderr)
        raise SystemExit(1)
    print("docs check: every page loaded without console messages; no broken links, missing images or off-site resources")


if __name__ == "__main__":
    main()
