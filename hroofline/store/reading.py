"""Reading a store's runs by their metadata alone, without pandas: their names, each run's metadata and the
launches file it names. The store is brought to today's layout first, once per process
(:mod:`hroofline.store.migration`). ``hroofline runs`` needs no more than this."""

from __future__ import annotations

from pathlib import Path

from hroofline.errors import StoreError, did_you_mean
from hroofline.model.run import RunMeta
from hroofline.store.files import RUN_FOLDER_PREFIX, StoreLayout, check_run_name, read_meta_json
from hroofline.store.migration import migrate_if_old


class StoreReader(StoreLayout):
    """The runs of a store, as their metadata."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._current = False  # the store's layout checked (and migrated when old) in this process

    def ensure_current(self) -> None:
        """Migrates a store written by an older hroofline, once per process (a no-op on a current store)."""
        if not self._current:
            migrate_if_old(self)
            self._current = True

    def run_names(self) -> list[str]:
        self.ensure_current()
        if not self.runs_dir.is_dir():
            return []
        return sorted(
            p.name.removeprefix(RUN_FOLDER_PREFIX)
            for p in self.runs_dir.iterdir()
            if p.name.startswith(RUN_FOLDER_PREFIX) and (p / "meta.json").is_file()
        )

    def has_run(self, name: str) -> bool:
        self.ensure_current()
        return (self.run_dir(name) / "meta.json").is_file()

    def load_meta(self, name: str) -> RunMeta:
        return RunMeta.from_json(self._read_meta_json(name))

    def committed(self, name: str) -> tuple[RunMeta, Path]:
        """A run's metadata and the launches file it names (what a reader of the run reads), in one read."""
        raw = self._read_meta_json(name)
        return RunMeta.from_json(raw), self.run_dir(name) / raw["launches_file"]

    def _read_meta_json(self, name: str) -> dict:
        check_run_name(name)
        self.ensure_current()
        path = self.run_dir(name) / "meta.json"
        if not path.is_file():
            hint = did_you_mean(name, self.run_names(), "runs there", "hroofline runs")
            raise StoreError(f"no run named {name!r} in store {self.root}", hint)
        data = read_meta_json(path)
        data["name"] = name  # the folder names the run
        return data
