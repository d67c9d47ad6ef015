"""The framework's own pages: the approval page and the tool console."""
