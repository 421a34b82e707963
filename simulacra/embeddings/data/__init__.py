"""Data files the embedders load with importlib.resources (a package so they ship in the wheel)."""
