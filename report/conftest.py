"""pytest options of the report tests (report/test_reports.py): the prophet binary they drive, and --keep."""
import os


def pytest_addoption(parser):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.addoption("--prophet", default=os.path.join(root, "build", "prophet"),
                     help="path to the prophet binary (default: build/prophet)")
    parser.addoption("--keep", action="store_true", help="keep the fixture's temp dir and print its path")
