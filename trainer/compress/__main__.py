"""``python -m corpusforge.trainer.compress quantize|prune|distill CONFIG [--set KEY=VALUE ...]``
(also ``corpusforge compress ...``; ``torchrun ... -m corpusforge.trainer.compress distill CONFIG`` for DDP)."""

from corpusforge.trainer.compress.cli import main
from corpusforge.trainer.device import exit_process

exit_process(main())
