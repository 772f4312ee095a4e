"""The book's own scripts: the setup cell, notebook execution, the HTML build."""
