"""Exceptions that carry a message meant for the user (the CLI prints them without a traceback)."""


class CorpusforgeError(Exception):
    """Base class for errors the user can act on."""


class ConfigError(CorpusforgeError):
    """A pipeline config is invalid; the message names the field."""


class SchemaError(CorpusforgeError):
    """A table does not match its record schema; the message names the field."""


class ManifestError(CorpusforgeError):
    """A dataset's manifest is missing, malformed, or disagrees with its shards."""


class AccountingError(CorpusforgeError):
    """A stage lost or invented rows: rows in != kept + rejected (a bug in the stage)."""
