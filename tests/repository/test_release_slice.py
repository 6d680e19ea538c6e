"""tests/torch_release_slice.txt, the part of the suite CI runs against every other supported
torch release (.ci/torch_release): each entry exists, and every folder of tests/ is in it."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ENTRIES = [
    line
    for line in (TESTS / "torch_release_slice.txt").read_text().splitlines()
    if line and not line.startswith("#")
]


def test_every_entry_is_a_test_file_of_the_suite():
    for entry in ENTRIES:
        path, _, test = entry.partition("::")
        file = TESTS.parent / path
        assert file.is_file() and file.name.startswith("test_"), entry
        if test:
            assert f"def {test.split('[')[0]}(" in file.read_text(), entry


def test_every_folder_of_the_suite_is_in_the_slice():
    folders = {p.parent.name for p in TESTS.glob("*/test_*.py")}
    covered = {Path(entry.split("::")[0]).parent.name for entry in ENTRIES}
    assert folders - covered == set()
