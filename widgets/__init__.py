"""Jupyter views of mqjoin values (ipywidgets + plotly), installed as ``mqjoin.widgets``."""
