"""corpusforge's companion trainer (issue 8): reads the shards through their manifest and
record schema only. Not built yet; see README's Status section."""
