"""Reading a store's runs by their metadata alone, without pandas: their names, each run's metadata and the
launches file it names. The store is brought to today's layout first, once per process
(:mod:`hroofline.store.migration`). ``hroofline runs`` needs no more than this."""

from __future__ import annotations

import fcntl
from dataclasses import dataclass
from pathlib import Path

from hroofline.errors import StoreError, did_you_mean
from hroofline.model.run import RunMeta
from hroofline.store.files import RUN_FOLDER_PREFIX, StoreLayout, check_run_name, read_meta_json
from hroofline.store.migration import migrate_if_old
from hroofline.store.rank_parts import PARTS_FOLDER


@dataclass(frozen=True)
class BrokenRun:
    """A run folder that cannot be read as a run: its metadata is missing or unreadable."""

    name: str
    reason: str
    hint: str  # what to do about it


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

    def run_folders(self) -> list[str]:
        """The names of every run folder, readable or not."""
        self.ensure_current()
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name.removeprefix(RUN_FOLDER_PREFIX) for p in self.runs_dir.iterdir() if _is_run_folder(p))

    def readable_metas(self) -> tuple[list[RunMeta], list[BrokenRun]]:
        """Every run's metadata that can be read, and the runs that cannot with the reason: one broken run never
        hides the others."""
        metas, broken = [], []
        for name in self.run_folders():
            try:
                meta, launches = self.committed(name)
            except StoreError as error:
                problem = self.broken(name, error)
                if problem:
                    broken.append(problem)
                continue
            damage = damaged_launches_file(launches)
            if damage:
                broken.append(BrokenRun(name, damage, f"`hroofline rm {name}` removes it; import it again"))
            else:
                metas.append(meta)
        return metas, broken

    def broken(self, name: str, error: StoreError) -> BrokenRun | None:
        """Why run folder ``name`` cannot be read (None: an import is creating it, and it has no metadata yet)."""
        run_dir = self.run_dir(name)
        removal = f"`hroofline rm {name}` removes it"
        if (run_dir / "meta.json").is_file():
            newer = "newer hroofline" in error.message  # not broken: this hroofline is too old to read it
            return BrokenRun(name, error.message, "upgrade hroofline" if newer else removal)
        if being_written(run_dir):
            return None
        ranks = len(list((run_dir / PARTS_FOLDER).glob("*.parquet")))
        if ranks:  # a killed `import --jobs`: its parts wait for the import to run again
            resume = f"run the same import again to resume, or `hroofline rm {name}`"
            return BrokenRun(name, f"an import of its ranks was interrupted ({ranks} ranks stored)", resume)
        kept = len(list(run_dir.glob("launches-*.parquet")))
        return BrokenRun(name, f"its metadata (meta.json) is missing; {kept} launches file(s) kept", removal)

    def has_run(self, name: str) -> bool:
        self.ensure_current()
        return (self.run_dir(name) / "meta.json").is_file()

    def load_meta(self, name: str) -> RunMeta:
        return RunMeta.from_json(self._read_meta_json(name))

    def committed(self, name: str) -> tuple[RunMeta, Path]:
        """A run's metadata and the launches file it names (what a reader of the run reads), in one read."""
        raw = self._read_meta_json(name)
        return RunMeta.from_json(raw), self.run_dir(name) / raw["launches_file"]

    def check_folder(self, name: str) -> None:
        """That run ``name`` has a folder, readable or not (what removing it needs)."""
        check_run_name(name)
        self.ensure_current()
        if not self.run_dir(name).is_dir():
            hint = did_you_mean(name, self.run_folders(), "runs there", "hroofline runs")
            raise StoreError(f"no run named {name!r} in store {self.root}", hint)

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


PARQUET_MAGIC = b"PAR1"  # a Parquet file starts and ends with it: a truncated copy lacks the end


def damaged_launches_file(path: Path) -> str | None:
    """What is wrong with a run's launches file where it is missing or cut short (its ends read, no Parquet
    reader needed: listing a store stays instant); None where it looks whole."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(PARQUET_MAGIC))
            size = handle.seek(0, 2)
            handle.seek(max(size - len(PARQUET_MAGIC), 0))
            tail = handle.read()
    except FileNotFoundError:
        return f"its launches file {path.name} is missing"
    except OSError as error:
        return f"its launches file {path.name} cannot be read ({error.strerror or error})"
    if head != PARQUET_MAGIC or tail != PARQUET_MAGIC or size < 3 * len(PARQUET_MAGIC):
        return f"its launches file {path.name} is truncated or not Parquet ({size:,} bytes)"
    return None


def _is_run_folder(path: Path) -> bool:
    return path.name.startswith(RUN_FOLDER_PREFIX) and path.is_dir()


def being_written(run_dir: Path) -> bool:
    """An import holds the run's lock: a new run's folder has no metadata until its first import commits."""
    try:
        with (run_dir / ".lock").open("rb") as handle:  # read only: listing a store never writes to it
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        return False
    return False
