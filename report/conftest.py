"""pytest options of the report tests (report/test_reports.py, report/test_reports_hostile.py): the prophet binary
they drive (and the `prophet` fixture that checks it), and --keep."""
import os

import pytest


def pytest_addoption(parser):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.addoption("--prophet", default=os.path.join(root, "build", "prophet"),
                     help="path to the prophet binary (default: build/prophet)")
    parser.addoption("--keep", action="store_true", help="keep the fixture's temp dir and print its path")


@pytest.fixture(scope="session")
def prophet(request):
    path = os.path.abspath(request.config.getoption("--prophet"))
    assert os.access(path, os.X_OK), f"prophet binary is not executable: {path}"
    return path
