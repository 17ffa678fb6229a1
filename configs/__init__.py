"""Example configurations; shipped in the package so that ``tclose demo`` finds quickstart.yaml."""
