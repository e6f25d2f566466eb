"""corpusforge: prepare pretraining data (text, images, point clouds) as sharded Parquet."""

__version__ = "0.1.0"

import os as _os

# Nothing is downloaded at run time. tldextract (used by presidio's email and URL recognizers)
# reads this when presidio is first imported: empty means its bundled suffix list, no network.
_os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")
