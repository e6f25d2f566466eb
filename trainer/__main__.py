"""``python -m corpusforge.trainer CONFIG`` and ``torchrun ... -m corpusforge.trainer CONFIG``."""

from corpusforge.trainer.device import exit_process
from corpusforge.trainer.train import main

main()
exit_process(0)
