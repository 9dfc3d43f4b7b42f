"""Packaging for achilles, driven by settings.ini (nbdev 2 template, without pkg_resources)."""
from configparser import ConfigParser
import setuptools

cfg_file = "settings.ini"
config = ConfigParser(delimiters=["="])
config.read(cfg_file, encoding="utf-8")
cfg = config["DEFAULT"]

expected = ("version description keywords author author_email license lib_name user "
            "min_python status audience language").split()
missing = [o for o in expected if o not in cfg]
if missing:
    raise SystemExit(f"settings.ini is missing {missing}")

licenses = {
    "apache2": ("Apache Software License 2.0", "OSI Approved :: Apache Software License"),
}
statuses = ["1 - Planning", "2 - Pre-Alpha", "3 - Alpha", "4 - Beta", "5 - Production/Stable",
            "6 - Mature", "7 - Inactive"]
py_versions = "3.10 3.11 3.12 3.13".split()

lic = licenses.get(cfg["license"].lower(), (cfg["license"], None))
min_python = cfg["min_python"]
requirements = cfg.get("requirements", "").split()
# Extras, each from `<name>_requirements` in settings.ini: nn (torch, for the target-attention attack), sdv and dp (the
# generator adapters), docs (the site's tools: MkDocs, see .ci/docs), dev (everything the notebooks and tests need), lab,
# bench (reference baselines), and all (every extra but bench, whose baselines are only for `achilles bench`).
EXTRAS = ("nn", "sdv", "dp", "docs", "dev", "lab", "bench")
extras = {name: cfg.get(f"{name}_requirements", "").split() for name in EXTRAS}
extras["all"] = sorted({r for name, reqs in extras.items() if name != "bench" for r in reqs})
console_scripts = cfg.get("console_scripts", "").split()

setuptools.setup(
    name=cfg["lib_name"],
    license=lic[0],
    classifiers=[
        "Development Status :: " + statuses[int(cfg["status"])],
        "Intended Audience :: " + cfg["audience"].title(),
        "Natural Language :: " + cfg["language"].title(),
    ]
    + ["Programming Language :: Python :: " + o for o in py_versions[py_versions.index(min_python):]]
    + (["License :: " + lic[1]] if lic[1] else []),
    url=cfg["git_url"],
    packages=setuptools.find_packages(include=["achilles", "achilles.*"]),
    include_package_data=True,
    package_data={"achilles": ["datasets/*.gz", "datasets/*.json"]},
    install_requires=requirements,
    extras_require=extras,
    dependency_links=cfg.get("dep_links", "").split(),
    python_requires=">=" + cfg["min_python"],
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    zip_safe=False,
    entry_points={
        "console_scripts": console_scripts,
        "nbdev": [f"{cfg.get('lib_path')}={cfg.get('lib_path')}._modidx:d"],
    },
    version=cfg["version"],
    description=cfg["description"],
    keywords=cfg["keywords"],
    author=cfg["author"],
    author_email=cfg["author_email"],
)
