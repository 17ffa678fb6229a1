"""The base layer: configuration, encoding, registry and helpers every layer uses."""
