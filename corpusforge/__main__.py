import sys

from corpusforge.cli import main

sys.exit(main())
