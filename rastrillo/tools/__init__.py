"""Agent-callable tools: the registry's schemas for each provider and the consent sentence."""

from rastrillo.tools.confirm import confirm_sentence
from rastrillo.tools.schemas import FORMATS, schemas, schemas_json

__all__ = ["FORMATS", "confirm_sentence", "schemas", "schemas_json"]
