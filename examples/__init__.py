"""Runnable examples around the server (see each package's docstring)."""
