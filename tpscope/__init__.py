"""tpscope: exposed communication in tensor-parallel training, measured from traces.

Importing this package stays light (no torch, dash or HTA): the GPU machine runs `tpscope run`
and `tpscope bench` from the source tree without the analyzer's libraries.

The Dash app is the top-level `dashboards/` folder and the package `tpscope.dashboards`:
pyproject.toml maps the folder for an install (editable or not), and the link
`tpscope/dashboards` (to `../dashboards`) is the same folder for a source tree on PYTHONPATH.
"""

from __future__ import annotations

__version__ = "0.1.0"
