"""A stage for tests: passes rows through after a pause, so a run can be killed mid-way."""

import time

from pydantic import Field

from corpusforge.stage import Stage, StageConfig, split


class SleepConfig(StageConfig):
    seconds: float = Field(0.2, ge=0)
    fail_on_text: str | None = None


class Sleep(Stage):
    name = "test.sleep"
    kinds = ("text",)
    Config = SleepConfig

    def process(self, table, stats):
        time.sleep(self.config.seconds)
        if self.config.fail_on_text and self.config.fail_on_text in table.column("text").to_pylist():
            raise RuntimeError("planted failure")
        import pyarrow as pa

        return split(table, pa.nulls(table.num_rows, pa.string()))
