"""Sources' identities (hroofline/importers/source_hash.py): a new run records the BLAKE3 of each file, and a run
written before BLAKE3 (SHA-256 identities) still recognises a file imported again."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import blake3

from hroofline.importers.source_hash import BLAKE3, SHA256, file_entry, file_hash, files_hash, run_algorithm
from hroofline.store.runs import RunStore

DATA = Path(__file__).parent / "data"
# A real H100 ncu "--page details" CSV export of one FP8 GEMM (the one tests/test_precision_roofs.py reads).
REPORT = DATA / "h100_llm_gemm_fp8_ncu_details.csv"
# Written by hroofline before BLAKE3 (main at ba44b95): `hroofline import REPORT --run legacy --store THIS`.
LEGACY_STORE = DATA / "store-main-sha256"


def test_a_new_run_records_the_blake3_of_the_file(cli) -> None:
    assert cli("import", REPORT, "--run", "new").code == 0
    assert cli("import", REPORT, "--run", "new").code == 0  # the same file again: the same source
    sources = json.loads((cli.store / "runs" / "run=new" / "meta.json").read_text())["sources"]
    # BLAKE3 of the file's bytes, by the reference package, not by hroofline
    assert [s["source_hash"] for s in sources] == ["blake3:" + blake3.blake3(REPORT.read_bytes()).hexdigest()]
    assert "sha256" not in sources[0]


def test_a_run_written_before_blake3_recognises_the_same_file(cli, tmp_path: Path) -> None:
    store = tmp_path / "legacy"
    shutil.copytree(LEGACY_STORE, store)
    old_sha256 = hashlib.sha256(REPORT.read_bytes()).hexdigest()
    written = json.loads((store / "runs" / "run=legacy" / "meta.json").read_text())["sources"]
    assert [s["sha256"] for s in written] == [old_sha256]  # the fixture is what the old version wrote

    result = cli("import", REPORT, "--run", "legacy", store_dir=store)

    assert result.code == 0, result.err
    run = RunStore(store).load("legacy")
    assert [s.source_hash for s in run.meta.sources] == [old_sha256]  # one source, still its SHA-256
    assert len(run.launches) == 1


def test_a_source_of_several_files_keeps_its_old_identity_in_an_old_run(tmp_path: Path) -> None:
    """Passes joined into one source: in a run begun before BLAKE3 their identity is the SHA-256 the old version
    computed (over each file's name and SHA-256); in a new run a BLAKE3 over names and BLAKE3 identities."""
    second = tmp_path / "second.csv"
    second.write_bytes(REPORT.read_bytes() + b"\n")
    paths = [REPORT, second]
    old = [{"name": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in paths]
    old_identity = hashlib.sha256("".join(f"{f['name']}\0{f['sha256']}\n" for f in old).encode()).hexdigest()
    assert run_algorithm([old_identity]) == SHA256
    legacy = [file_entry(str(p), file_hash(p, SHA256)) for p in paths]
    assert files_hash(legacy, SHA256) == files_hash(old, SHA256) == old_identity

    assert run_algorithm([]) == run_algorithm(["blake3:" + "0" * 64]) == BLAKE3
    new = [file_entry(str(p), file_hash(p)) for p in paths]
    text = "".join(f"{p}\0blake3:{blake3.blake3(p.read_bytes()).hexdigest()}\n" for p in paths).encode()
    assert files_hash(new, BLAKE3) == "blake3:" + blake3.blake3(text).hexdigest()
