"""``fastdp reproduce`` writes where the user says, never a quick run over the committed
full-run reports, and an existing checkpoint without --resume is one clear line."""
from pathlib import Path

from fastdp.cli import build_parser

from _files import run

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_default_output_is_a_directory_of_its_own_in_the_current_directory():
    args = build_parser().parse_args(["reproduce", "seed000"])
    assert args.out == "fastdp-reproductions"


def test_a_quick_run_into_the_committed_reports_is_refused(tmp_path, capsys, monkeypatch):
    import fastdp

    checkout = tmp_path / "checkout"       # a stand-in checkout: pyproject.toml, reproductions/
    (checkout / "reproductions").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    (checkout / "reproductions" / "seed000.md").write_text("full run\n")
    monkeypatch.setattr(fastdp, "__file__", str(checkout / "fastdp" / "__init__.py"))
    monkeypatch.chdir(checkout)
    status, out, err = run(capsys, "reproduce", "seed000", "--quick", "--out", "reproductions",
                           "--budget-min", "0")
    assert status == 2 and out == ""
    assert "committed full-run reports" in err and len(err.strip().splitlines()) == 1
    assert [p.name for p in (checkout / "reproductions").iterdir()] == ["seed000.md"]
    assert (checkout / "reproductions" / "seed000.md").read_text() == "full run\n"


def test_the_committed_reports_of_this_checkout_are_recognised():
    from fastdp.cli.commands import _committed_reports

    assert _committed_reports() == REPO_ROOT / "reproductions"


def test_an_existing_checkpoint_without_resume_is_one_line(tmp_path, capsys):
    (tmp_path / "seed002_units.jsonl").write_text('{"unit": 1}\n')
    status, out, err = run(capsys, "reproduce", "seed002", "--quick", "--out", tmp_path)
    assert status == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--resume" in lines[0] and "usage:" not in err
