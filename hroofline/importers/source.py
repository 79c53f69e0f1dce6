"""What the import stage hands the store: one source's launches and what is known of it."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hroofline.model.run import SourceInfo


@dataclass
class ImportedSource:
    info: SourceInfo
    launches: pd.DataFrame
    cc: str | None
    device_name: str | None
    on_cpu: bool = False  # its launches ran on the CPU (ATen ops), its run's roofs are a CPU's
    gpu: str | None = None  # the catalog GPU found by the device's properties where its name is not known
