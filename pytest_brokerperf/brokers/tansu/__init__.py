"""tansu."""
