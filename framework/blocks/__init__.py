"""Block execution: split a table into blocks that keep the guarantee, run them on an executor."""
