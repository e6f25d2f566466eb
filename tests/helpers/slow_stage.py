"""A stage for tests: passes rows through after a pause, so a run can be killed mid-way."""

import errno
import os
import signal
import time

from pydantic import Field

from corpusforge.stage import Stage, StageConfig, split


class SleepConfig(StageConfig):
    seconds: float = Field(0.2, ge=0)
    fail_on_text: str | None = None
    die_once_on_text: str | None = None     # SIGKILL this process the first time the text is seen
    die_marker: str | None = None           # file that records that it has died once


class Sleep(Stage):
    name = "test.sleep"
    kinds = ("text",)
    Config = SleepConfig

    def process(self, table, stats):
        time.sleep(self.config.seconds)
        texts = table.column("text").to_pylist()
        if self.config.fail_on_text and self.config.fail_on_text in texts:
            raise OSError(errno.EIO, "planted failure")     # the environment's, not the record's: the unit fails
        if self.config.die_once_on_text in texts and not os.path.exists(self.config.die_marker):
            open(self.config.die_marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)          # a worker dying: no exception, no cleanup
        import pyarrow as pa

        return split(table, pa.nulls(table.num_rows, pa.string()))
