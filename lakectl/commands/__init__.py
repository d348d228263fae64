"""lakectl's command groups, one module each."""
