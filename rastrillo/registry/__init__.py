"""The tool registry, pure: what an action declares, the confirm sentence, the
provider schemas and the registry's errors. Imports no web stack, so
``rastrillo generate`` and schema rendering stay cheap."""
