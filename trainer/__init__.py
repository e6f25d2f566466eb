"""corpusforge's companion trainer, imported as ``corpusforge.trainer`` (this folder is linked into
the package, so it installs under corpusforge's one import name). It reads the shards through
their manifest and record schema only; ``python -m corpusforge.trainer CONFIG`` or
``corpusforge train CONFIG`` runs it."""
