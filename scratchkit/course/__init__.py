"""What only the notebooks use: interactive widgets (`widgets.py`), plotly figures (`viz/`), the
numbers the course plots (`analysis.py`, `hit_curves.py`), the hazard lab, the pipeline replay,
and training in the background (`live.py`)."""
