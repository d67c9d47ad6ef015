"""The framework's own pages: approvals, agents, the consent page and the tool console."""
