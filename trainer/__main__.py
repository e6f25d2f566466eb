"""``python -m corpusforge.trainer CONFIG`` and ``torchrun ... -m corpusforge.trainer CONFIG``."""

import os
import sys

from corpusforge.trainer.train import main

main()
if os.environ.get("WORLD_SIZE", "1") != "1":
    # The run has finished, saved and destroyed its process groups. Leave without interpreter
    # finalization: gloo's worker threads can still hold tensors while the interpreter tears down,
    # which aborts the process now and then ("terminate called without an active exception",
    # pytorch/pytorch#190489) and would turn a finished run into a failed torchrun.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
