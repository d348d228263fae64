"""The UI's pages, one module per area; each defines ``router``."""
