"""The README is a front page and the docs keep step with the code: under 120 lines, the
set-up is exactly two commands (the install + main job, the tests), CI runs the README's
test command, every guide it links exists, every preset `decent8 list` shows is documented."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _setup_commands() -> list[str]:
    section = README.split("## Set-up (two commands)", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def test_readme_is_a_short_front_page():
    assert len(README.splitlines()) < 120
    assert "<!-- results:main_job -->" in README and "<!-- /results:main_job -->" in README


def test_setup_is_two_commands_install_then_tests():
    install, tests = _setup_commands()
    steps = [s.strip() for s in install.split("&&")]
    assert steps[0] == "python3 -m pip install torch==2.13.0"      # torch pinned, first
    assert steps[1] == 'python3 -m pip install -e ".[test]"'
    assert steps[2].split()[-2:] == ["decent8", "train"]            # the main job, default options
    assert tests == "python3 -m pytest"


def test_ci_runs_the_readme_test_command_then_the_slow_tests():
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    tests = _setup_commands()[1]
    assert ci[-2:] == [tests, f"{tests} -m slow"]
    assert any("pip install" in ln and "torch==2.13.0" in ln for ln in ci)
    assert any("pip install" in ln and '-e ".[test]"' in ln for ln in ci)


def _links() -> list[str]:
    return re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)


EXTENDING = "docs/extending.md"


def test_every_linked_file_exists():
    links = _links()
    assert len(links) >= 10
    missing = [link for link in links if not link.startswith("http") and not (ROOT / link).exists()]
    assert missing == []
    for guide in ("execution", "distributed", "algorithms", "extending", "experiments", "usage"):
        assert f"docs/{guide}.md" in links
    assert "docs/results/README.md" in links


def test_the_extension_guide_exists():
    assert EXTENDING in _links() and (ROOT / EXTENDING).is_file()


def test_every_listed_preset_is_documented():
    from decent8.experiments.presets import list_presets

    doc = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    presets = list_presets()
    assert "paper/cifar10_findings_fast" in presets
    assert [p for p in presets if f"`{p}`" not in doc] == []


def test_tensorboard_extra_installs_the_viewer():
    text = (ROOT / "pyproject.toml").read_text()
    extra = re.search(r"^tensorboard = \[(.*)\]$", text, re.M).group(1)
    assert '"tensorboard' in extra.replace('"tensorboardX', "") and "tensorboardX" in extra
