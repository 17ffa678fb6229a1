"""Built-in connectors: SQL databases through SQLAlchemy 2."""
