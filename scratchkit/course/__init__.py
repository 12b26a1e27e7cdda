"""What only the notebooks use: interactive widgets (`cache_explorer.py`, `pipeline_visualizer.py`,
`dashboard.py`: the only modules of the kit that import ipywidgets), plotly figures
(`viz/`), HTML tables (`tables.py`), the numbers the course plots (`analysis.py`, `hit_curves.py`),
the hazard lab, the pipeline replay, training in the background (`live.py`), and the exercises the
learner writes with the checks that grade them (`exercises/`)."""
