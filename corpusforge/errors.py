"""Exceptions that carry a message meant for the user (the CLI prints them without a traceback)."""


class CorpusforgeError(Exception):
    """Base class for errors the user can act on."""


class ConfigError(CorpusforgeError, ValueError):
    """A config (pipeline, mix, train, compress) or a command line is invalid; the message names
    the field. Also a ValueError: an invalid value is what it is."""


class SchemaError(CorpusforgeError):
    """A table does not match its record schema; the message names the field."""


class ManifestError(CorpusforgeError):
    """A dataset's manifest is missing, malformed, or disagrees with its shards."""


class AccountingError(CorpusforgeError):
    """A stage lost or invented rows: rows in != kept + rejected (a bug in the stage)."""


class UnitsFailed(CorpusforgeError):
    """Some units failed after their retries; every other unit finished (and stays finished for
    ``--resume``). ``failures`` maps the unit index to its last error."""

    def __init__(self, segment: int, failures: dict[int, str], total: int):
        self.segment, self.failures, self.total = segment, failures, total
        lines = "\n".join(f"  unit {u}: {err}" for u, err in sorted(failures.items()))
        super().__init__(f"segment {segment}: {len(failures)} of {total} units failed after retries "
                         f"(the others finished; fix the cause and rerun with --resume):\n{lines}")


def describe(exc: BaseException) -> str:
    """An exception in one line of at most 500 characters, as failures are listed."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
