"""Sphinx configuration of the ppl_bnn documentation site (``nox -s docs``).

The site is Markdown (MyST); the tutorials are MyST notebooks that myst-nb executes at every
build; the benchmark pages' tables are read from ``benchmarks/results/`` at build time by the
``records`` extension in ``_ext/``. Warnings are errors (``sphinx-build -W``), so a broken
internal link, a missing page or a failing tutorial stops the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

project = "ppl_bnn"
author = "the ppl_bnn authors"
copyright = "2026, the ppl_bnn authors"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "records",
    "mathml",
]

source_suffix = {".md": "myst-nb", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md"]
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# Tutorials run at every build, top to bottom; an error in a cell fails the build.
nb_execution_mode = "force"
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
# What a cell prints on stderr (progress logs, library warnings) stays out of the pages.
nb_output_stderr = "remove"

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Math is converted to MathML at build time (``_ext/mathml.py``), so no page loads MathJax.
html_math_renderer = "mathml"

html_theme = "pydata_sphinx_theme"
html_title = "ppl_bnn"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_end": ["navbar-icon-links"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_context = {"default_mode": "auto"}
html_show_sourcelink = False
# The site works from a file:// URL and offline: no external fonts, analytics or search index
# fetched from elsewhere.
html_static_path = ["_static"]
html_css_files = ["ppl_bnn.css"]  # long code lines wrap
# Pages with no pages under them have no section navigation to show: no left sidebar.
html_sidebars = {page: [] for page in ("getting-started", "api", "defaults", "architecture")}
