"""Shared test helpers: the real data in ../shared, and running the CLI in-process or as a program."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.util
import io
import lzma
import os
import pickle
import runpy
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest

from hroofline.cli.main import main
from hroofline.importers.kineto import CpuEvent, TraceEvents, parse_trace
from hroofline.importers.kineto_links import link_activities
from hroofline.model.run import Run
from hroofline.store.runs import RunStore
from tests.shared_runs import H100_RUNS, KINETO_TRACES

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

    from hroofline.collect.meta_trace import StepTrace

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


SHARED_TRACES_KEY = "hroofline_shared_traces"  # in a pytest-xdist worker's workerinput: the workers' traces folder
SHARED_CACHE_KEY = "hroofline_shared_cache"  # in its workerinput: the session's cache folder, the controller's
_traces_folder = pytest.StashKey[Path]()
shared_traces: Path | None = None  # in a worker: where the workers keep the steps the bench traced, one file each


@cache
def estimate_error_bench() -> ModuleType:
    """bench/estimate_error.py as a module: its ``samples`` traces and bounds measured steps as the bench does.
    Under pytest-xdist its ``traced`` is shared: in make check-figures the Hopper steps that
    figures/test_hopper_estimate traces are also figures/test_host_cost's, test_layout_conversions' and
    test_memory's, often on the other worker."""
    spec = importlib.util.spec_from_file_location("estimate_error", REPO / "bench" / "estimate_error.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    if shared_traces is not None:
        module.traced = _traced_shared_by_workers(module.traced.__wrapped__, shared_traces)
    return module


def _traced_shared_by_workers(traced: Callable[..., StepTrace], folder: Path) -> Callable[..., StepTrace]:
    """``traced`` (the bench's, uncached), its steps kept in ``folder`` for every worker of this session: a step
    another worker traced is read back instead of traced again (about a second each here), and one traced here is
    written atomically for the others (two workers that want a step at the same moment both trace it)."""

    @cache
    def shared(model: str, batch: int, precision: str, phases: str, nhwc: bool) -> StepTrace:
        path = folder / f"{quote(model, safe='')}-{int(batch)}-{precision}-{phases}-{'nhwc' if nhwc else 'nchw'}.pickle"
        if path.exists():
            return pickle.loads(path.read_bytes())
        trace = traced(model, batch, precision, phases, nhwc)
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_bytes(pickle.dumps(trace))
        partial.replace(path)
        return trace

    return shared


@cache
def host_overlap_bench() -> ModuleType:
    """bench/host_overlap.py as a module (it imports bench/estimate_error.py, loaded as above)."""
    need(SHARED / "reference" / "published-step-times.csv")
    estimate_error_bench()
    spec = importlib.util.spec_from_file_location("host_overlap", REPO / "bench" / "host_overlap.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class LinkedKernel:
    """A kernel of a recorded trace and the ops open on its launching thread at its launch (hroofline's own linking,
    as ``import`` does)."""

    name: str
    seconds: float
    ops: tuple[CpuEvent, ...]  # dispatchable ops with recorded inputs, outermost first


def linked_kernels(path: Path) -> tuple[TraceEvents, list[LinkedKernel]]:
    """The kernels of an xz-compressed torch.profiler trace, each with the ops that launched it."""
    trace = parse_trace(lzma.decompress(path.read_bytes()), path)
    kernels = [activity for activity in trace.gpu if activity.category == "kernel"]
    links = link_activities(trace, kernels)
    return trace, [LinkedKernel(k.name, k.duration_s, link.candidates) for k, link in zip(kernels, links, strict=True)]


def need(path: Path) -> Path:
    """A path in ../shared: skip without it, or fail when HROOFLINE_REQUIRE_FIXTURES=1."""
    if path.exists():
        return path
    reason = f"needs the real data at {path} (../shared beside the checkout)"
    if os.environ.get("HROOFLINE_REQUIRE_FIXTURES") == "1":
        pytest.fail(reason + "; HROOFLINE_REQUIRE_FIXTURES=1 makes this a failure")
    pytest.skip(reason)


def need_package(name: str) -> ModuleType:
    """An optional package of the dev extras, imported: skip without it, or fail when HROOFLINE_REQUIRE_FIXTURES=1
    (a checkout set up with `make` has it; a test that would skip there hides a broken set-up)."""
    if importlib.util.find_spec(name) is None:
        reason = f"needs {name} (in the dev extras: pip install -e '.[dev]')"
        if os.environ.get("HROOFLINE_REQUIRE_FIXTURES") == "1":
            pytest.fail(reason + "; HROOFLINE_REQUIRE_FIXTURES=1 makes this a failure")
        pytest.skip(reason)
    return importlib.import_module(name)


@pytest.fixture(scope="session")
def ncu_dir() -> Path:
    return need(SHARED / "fixtures" / "ncu")


@pytest.fixture(scope="session")
def deepcam_dir() -> Path:
    return need(SHARED / "fixtures" / "deepcam")


@pytest.fixture(scope="session")
def h100_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared H100 files, decompressed once (``lzma``): under pytest-xdist once a session, into the folder the
    workers share (312 MB, 1.3 s of decompression each here), each file written under another name and then
    renamed, so that no worker reads one half written."""
    shared = need(SHARED / "fixtures" / "h100")
    folder = shared_traces / "h100" if shared_traces is not None else tmp_path_factory.mktemp("h100")
    folder.mkdir(exist_ok=True)
    for path in shared.iterdir():
        target = folder / (path.stem if path.suffix == ".xz" else path.name)
        if not path.is_file() or target.exists():
            continue
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        with lzma.open(path) if path.suffix == ".xz" else path.open("rb") as source, partial.open("wb") as plain:
            shutil.copyfileobj(source, plain)
        partial.replace(target)
    return folder


STORE_COMMANDS = {"import", "runs", "query", "kernels", "summary", "steps", "top", "chart", "report", "rm", "rename"}
DEEPCAM_CONFIGS = [(cfg, phase) for cfg in ("O0", "O1") for phase in ("fw", "bw", "opt")]


AS_IMPORTED: dict[Path, str] = {}  # each read-only session store's tree_digest as its fixture left it


@pytest.fixture(scope="session")
def deepcam_store(tmp_path_factory: pytest.TempPathFactory, deepcam_dir: Path) -> Path:
    """Runs deepcam-O0 (FP32) and deepcam-O1 (AMP) imported from all six DeepCAM folders, on a V100; read only
    (a test that writes to it fails: _read_only_stores_stay_as_imported)."""
    imports = []
    for cfg, phase in DEEPCAM_CONFIGS:
        folder = deepcam_dir / f"pt-{cfg}-Adam-{phase}"
        imports.append(["import", str(folder), "--run", f"deepcam-{cfg}", "--gpu", "v100", "--phase", phase])
    return read_only_store(tmp_path_factory, "deepcam", imports)


def read_only_store(tmp_path_factory: pytest.TempPathFactory, name: str, imports: list[list[str]]) -> Path:
    """A store made by the ``hroofline import`` command lines ``imports`` (each without --store), once a session:
    under pytest-xdist in the folder the workers share, by the first worker that asks while the others wait on a
    lock (each import took a second or more, and the two workers each imported the same files before). A store left
    half made by a worker that died is made again. Read only: _read_only_stores_stay_as_imported holds each test to
    it (a test of one worker that writes to it is failed there, and the other worker's next test fails too)."""
    if shared_traces is None:
        store = tmp_path_factory.mktemp(name) / "store"
        for argv in imports:
            assert main([*argv, "--store", str(store)]) == 0
    else:
        store = shared_traces / name / "store"
        made = shared_traces / name / "made"
        store.parent.mkdir(exist_ok=True)
        with (shared_traces / name / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not made.exists():
                shutil.rmtree(store, ignore_errors=True)
                for argv in imports:
                    assert main([*argv, "--store", str(store)]) == 0
                made.touch()
    AS_IMPORTED[store] = tree_digest(store)
    return store


@pytest.fixture(scope="session")
def h100_runs_store(tmp_path_factory: pytest.TempPathFactory, h100_dir: Path) -> Path:
    """The runs of :data:`H100_RUNS`, imported once a session (the GPT-2 report alone takes about 2 s): read only
    (a test that writes to it fails: _read_only_stores_stay_as_imported; copy it with shutil.copytree)."""
    imports = [["import", str(h100_dir / name), "--run", run, *options] for run, (name, options) in H100_RUNS.items()]
    return read_only_store(tmp_path_factory, "h100-runs", imports)


@pytest.fixture(scope="session")
def kineto_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The traces of :data:`KINETO_TRACES`, each imported as it is into a run of its key, once a session (the
    recsys trace alone takes about 1.7 s): read only (a test that writes to it fails:
    _read_only_stores_stay_as_imported; copy it with shutil.copytree)."""
    paths = {run: need(SHARED / "fixtures" / "kineto" / name) for run, name in KINETO_TRACES.items()}
    return read_only_store(
        tmp_path_factory, "kineto", [["import", str(path), "--run", run] for run, path in paths.items()]
    )


@pytest.fixture(scope="session")
def vllm_joined(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Run]:
    """vLLM's piecewise-graph replay imported with its capture trace (../shared/fixtures/compiled/), as a user
    imports it: what the import said, and the run."""
    compiled = SHARED / "fixtures" / "compiled"
    replay = need(compiled / "vllm-mi300x-piecewise-replay.json.gz")
    capture = need(compiled / "vllm-mi300x-piecewise-capture.json.gz")
    store = tmp_path_factory.mktemp("vllm-joined") / "store"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["import", str(replay), "--capture", str(capture), "--run", "v", "--store", str(store)])
    assert code == 0, out.getvalue()
    return out.getvalue(), RunStore(store).load("v")


# One VGG-16 FP32 batch-32 training step traced with torch.profiler by hroofline on an H200 twice (two visits) and on
# an H100 (tests/data/gpu-2026-11-27/README.md): the same step on the same GPU, and on another.
VGG_TRACES = {
    "vgg-h200": REPO / "tests/data/gpu-2026-11-27/h200-fifth/vgg16-fp32-b32-train-nchw-trace.json.xz",
    "vgg-h200-again": REPO / "tests/data/gpu-2026-11-27/h200-layouts/vgg16-fp32-b32-train-nchw-trace.json.xz",
    "vgg-h100": REPO / "tests/data/gpu-2026-11-27/h100-sixth/vgg16-fp32-b32-train-nchw-trace.json.xz",
}


@pytest.fixture(scope="session")
def vgg_traces_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runs of :data:`VGG_TRACES`, imported once a session; read only (a test that writes copies it)."""
    imports = [["import", str(trace), "--run", run] for run, trace in VGG_TRACES.items()]
    return read_only_store(tmp_path_factory, "vgg-traces", imports)


@pytest.fixture
def deepcam_store_copy(deepcam_store: Path, tmp_path: Path) -> Path:
    """A copy of the session's DeepCAM store, for a test that writes to it."""
    store = tmp_path / "deepcam-store"
    shutil.copytree(deepcam_store, store)
    return store


# the session-scoped stores that the tests of many files read, and the fixtures that give a test a copy to change
COPY_FIXTURES = {"deepcam_store": "deepcam_store_copy"}
READ_ONLY_STORES = ("deepcam_store", "h100_runs_store", "kineto_store", "vgg_traces_store")


@pytest.fixture(autouse=True)
def _read_only_stores_stay_as_imported(request: pytest.FixtureRequest) -> Iterator[None]:
    """The session's read-only stores are read by tests of many files, in the order pytest-xdist gives them to a
    worker: a test that writes to one (instead of to a copy) fails at its own teardown, and one whose module- or
    session-scoped fixture wrote to it at setup fails at its setup, not a later reader by chance of order."""
    names = [name for name in READ_ONLY_STORES if name in request.fixturenames]
    if not names:
        yield
        return
    stores: dict[str, Path] = {name: request.getfixturevalue(name) for name in names}
    test = request.node.nodeid
    for name, store in stores.items():
        _fail_if_changed(store, name, f"a module- or session-scoped fixture of {test} or of a test before it changed")
    yield
    for name, store in stores.items():
        _fail_if_changed(store, name, f"{test} changed")


def _fail_if_changed(store: Path, fixture: str, who: str) -> None:
    """Fail once per change: the store as it now is becomes the one the next tests are held to."""
    now = tree_digest(store)
    if now != AS_IMPORTED[store]:
        AS_IMPORTED[store] = now
        pytest.fail(f"{who} the session's {fixture}: write to {COPY_FIXTURES.get(fixture, 'a copy (shutil.copytree)')}")


@pytest.fixture
def cpu_profile_args(tmp_path: Path) -> list[str]:
    """`hroofline profile` of resnet18 at batch 1 on the CPU, with fixed ceilings instead of measuring."""
    ceilings = tmp_path / "fixed-ceilings.toml"
    ceilings.write_text(
        'name = "fixed"\n[ceilings]\nl1 = 400e9\nhbm = 40e9\nfp32 = 400e9\nfp16 = 800e9\nfp64 = 100e9\n'
    )
    return ["profile", "--arch", "resnet18", "--gpu", "cpu", "--batch-size", "1", "--ceilings", str(ceilings)]


@dataclass
class Result:
    code: int
    out: str
    err: str


def main_status(argv: list[str]) -> int:
    """``hroofline ARGV`` by the CLI's main() in this process, its exit status as the shell sees it: argparse's
    usage errors raise SystemExit, whose code None is 0 and a message 1."""
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else int(stop.code is not None)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    """Run `hroofline ARGS` in-process against a store in tmp_path."""
    store = tmp_path / "store"

    def run(*args: str, store_dir: Path | None = None) -> Result:
        argv = [str(a) for a in args]
        if argv and argv[0] in STORE_COMMANDS and "--store" not in argv:
            argv += ["--store", str(store_dir or store)]
        code = main_status(argv)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    run.store = store  # type: ignore[attr-defined]
    return run


def run_program(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    """Run hroofline as a separate process, as a user would."""
    completed = subprocess.run(
        [sys.executable, "-m", "hroofline", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=300,
    )
    return Result(completed.returncode, completed.stdout, completed.stderr)


def run_script_here(script: Path, *args: object) -> None:
    """Run a Python script in this process as ``python SCRIPT ARGS`` runs it (``sys.argv`` its own meanwhile): a
    user's torch script without a program's start (importing torch and torchvision again, 3 to 4 s here)."""
    saved = sys.argv
    sys.argv = [str(script), *map(str, args)]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = saved


def tree_digest(root: Path) -> str:
    """A digest of every file name and content under root (empty string when root is absent)."""
    if not root.exists():
        return ""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


# The files with the most work (tracing hundreds of measured steps, running the README, importing real traces in
# programs of their own), costliest first, as paths under tests/: started before the rest (make test and make
# check-figures keep this order: --no-loadscope-reorder), they run beside the short files, and the workers end nearer
# together than with one finishing the last long file alone. make test runs tests/ without tests/figures (its files
# here took 7.7 s or more each, summed, in a run of the 1,116 tests with --durations=0 on 2026-11-29, in that order),
# make check-figures tests/figures alone.
SLOWEST_FIRST = (
    "figures/test_hopper_estimate.py",
    "figures/test_timm_step_times.py",
    "figures/test_layout_conversions.py",
    "figures/test_validation_page.py",
    "figures/test_guides.py",
    "test_readme.py",
    "test_help_examples.py",
    "test_kineto.py",
    "test_distinct_launches.py",
    "test_advice.py",
    "test_cpu_profile.py",
    "test_browser.py",
    "test_predict.py",
    "test_charts.py",
    "test_hostile_input.py",
    "test_compiled_layers.py",
    "test_sweep.py",
    "test_compare.py",
    "test_batch_norm.py",
    "test_layers.py",
    "test_docs.py",
    "test_cpu_traces.py",
    "test_newcomer.py",
    "test_fixtures_import.py",
    "test_layout_conversions.py",
    "test_golden.py",
    "test_import_limits.py",
)


_cache_folder = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """In a pytest-xdist worker, PyTorch computes on one thread (as do the programs the tests start with this
    environment; a test that starts one with an environment of its own leaves it the default): its default of
    one per core put four busy threads on two cores under two workers, and a CPU timing test beside a busy worker
    took 39 s instead of 14. A worker also takes the folder of traces the workers share from its workerinput.
    What hroofline caches per machine (a CPU's measured ceilings) goes to a folder of this process's own, for it
    and the programs it starts, never to the user's ~/.cache; under pytest-xdist one folder for the session, the
    controller's, so that the CPU's ceilings are measured once (about 6 s here), not once per worker. Inductor
    compiles in the worker (and the programs it starts), without a pool of compile processes: on two cores
    beside another worker the pool's processes, each importing torch, cost more than they save."""
    global shared_traces
    workerinput = getattr(config, "workerinput", {})
    if SHARED_CACHE_KEY in workerinput:
        os.environ["HROOFLINE_CACHE_DIR"] = workerinput[SHARED_CACHE_KEY]  # the controller removes it
    else:
        config.stash[_cache_folder] = Path(tempfile.mkdtemp(prefix="hroofline-cache-"))
        os.environ["HROOFLINE_CACHE_DIR"] = str(config.stash[_cache_folder])
    if SHARED_TRACES_KEY in workerinput:
        shared_traces = Path(workerinput[SHARED_TRACES_KEY])
    if "PYTEST_XDIST_WORKER" in os.environ:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("MKL_NUM_THREADS", "1")
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        if "torch" in sys.modules:  # a plugin imported it first: the environment no longer reaches it
            sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: WorkerController) -> None:
    """pytest-xdist, before it starts a worker: the folders where the workers share traced steps and what hroofline
    caches per machine, one each per session."""
    stash = node.config.stash
    if _traces_folder not in stash:
        stash[_traces_folder] = Path(tempfile.mkdtemp(prefix="hroofline-traces-"))
    node.workerinput[SHARED_TRACES_KEY] = str(stash[_traces_folder])
    node.workerinput[SHARED_CACHE_KEY] = str(stash[_cache_folder])


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller removes the workers' traces folder and the cache folder it made (the workers' too)."""
    if _traces_folder in config.stash:
        shutil.rmtree(config.stash[_traces_folder], ignore_errors=True)
    if _cache_folder in config.stash:
        shutil.rmtree(config.stash[_cache_folder], ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: number for number, name in enumerate(SLOWEST_FIRST)}
    tests = Path(__file__).parent

    def place(item: pytest.Item) -> int:
        path = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else item.path.name
        return rank.get(path, len(rank))

    items.sort(key=place)  # stable: the rest keep their order


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A PATH whose ncu is the stand-in (tests/standin/ncu): it checks hroofline's command line and replays a real
    report (HROOFLINE_STANDIN_REPORT)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").symlink_to(REPO / "tests" / "standin" / "ncu")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir / "ncu"
