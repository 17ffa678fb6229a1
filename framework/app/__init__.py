"""The application: the command line, compare, demo, init and the HTML pages."""
