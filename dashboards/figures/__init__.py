"""Pure functions: analyzer results (plain rows, arrays) -> plotly figures. No Dash, no I/O."""
