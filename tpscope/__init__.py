"""tpscope: exposed communication in tensor-parallel training, measured from traces.

Importing this package stays light (no torch, dash or HTA): the GPU machine runs `tpscope run`
and `tpscope bench` from the source tree without the analyzer's libraries.
"""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.1.0"

# The Dash app lives in the top-level `dashboards/` folder and is installed as
# `tpscope.dashboards`. From a source checkout (PYTHONPATH=., or an editable install) the same
# import resolves through the checkout's root.
_checkout = _Path(__file__).resolve().parent.parent
if (_checkout / "dashboards" / "__init__.py").is_file() and (
    _checkout / "pyproject.toml"
).is_file():
    __path__.append(str(_checkout))  # type: ignore[name-defined]  # noqa: F821
