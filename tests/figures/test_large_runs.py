"""How hroofline reads large sources, as the validation page says it (docs/validation.md, key ``large-runs``): the
limits and batch sizes the importers and the store use, compared figure by figure. tests/test_import_limits.py
checks what they do (a bomb refused in little memory, a million-launch CSV read in batches) in make test."""

from __future__ import annotations

from hroofline.importers.ncu_csv_wide import BLOCK_SIZE
from hroofline.importers.raw import _SNIFF, EXPANSION_RATIO
from hroofline.store.files import WRITE_ROWS
from tests.validation_page import assert_page_shows, page_figures


def test_the_page_shows_how_large_sources_are_read() -> None:
    computed = [EXPANSION_RATIO, _SNIFF / 1e3, BLOCK_SIZE / 1e6, WRITE_ROWS]
    assert_page_shows(page_figures("large-runs"), computed, "how large sources are read")
