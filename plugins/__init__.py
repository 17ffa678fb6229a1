"""Built-in plugins: the paper's algorithms, MDAV, and the distances for confidential attributes."""
