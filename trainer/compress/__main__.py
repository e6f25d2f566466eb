"""``python -m corpusforge.trainer.compress quantize|prune|distill CONFIG [--set KEY=VALUE ...]``
(also ``corpusforge compress ...``; ``torchrun ... -m corpusforge.trainer.compress distill CONFIG`` for DDP)."""

import os
import sys

from corpusforge.trainer.compress.cli import main

code = main()
if os.environ.get("WORLD_SIZE", "1") != "1":      # as trainer/__main__.py: no gloo teardown at exit
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
