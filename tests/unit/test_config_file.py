"""remember_setting: one top-level line set in the user's TOML file, every other byte kept, or nothing written."""

import os
import stat
import tomllib

import pytest

from tui.config_file import NEW_FILE_MODE, remember_setting

USER_FILE = '''# my settings
api_key = "sk-mine"  # kept where it is
theme = "nord"

[sim]
gpu = "H200"
'''


def test_a_missing_file_is_created_with_only_that_line_and_for_the_user_alone(tmp_path):
    path = tmp_path / "phasetop" / "config.toml"
    remember_setting(path, "theme", "phasetop-projector")
    assert path.read_text() == 'theme = "phasetop-projector"\n'
    assert stat.S_IMODE(path.stat().st_mode) == NEW_FILE_MODE
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"], "no temp file left beside it"


def test_the_line_is_replaced_and_the_rest_kept_byte_for_byte(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(USER_FILE)
    path.chmod(0o640)
    remember_setting(path, "theme", "phasetop-projector")
    assert path.read_text() == USER_FILE.replace('theme = "nord"', 'theme = "phasetop-projector"')
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.parametrize("text, expected", [
    ('url = "http://h:8000"\n\n[sim]\ngpu = "H200"\n', 'url = "http://h:8000"\n\ntheme = "dracula"\n\n[sim]\ngpu = "H200"\n'),
    ('url = "http://h:8000"', 'url = "http://h:8000"\ntheme = "dracula"\n'),
    ("", 'theme = "dracula"\n'),
])
def test_a_file_without_the_key_gets_it_before_its_first_table(tmp_path, text, expected):
    path = tmp_path / "config.toml"
    path.write_text(text)
    remember_setting(path, "theme", "dracula")
    assert path.read_text() == expected
    assert tomllib.loads(path.read_text())["theme"] == "dracula"


@pytest.mark.parametrize("text", [
    'note = """\ntheme = "in a string"\n"""\n',  # the key's line is inside a multi-line string
    'url = "unterminated\n',  # not TOML
    '"theme" = "nord"\n',  # set in a way this does not rewrite: a second key would be added
])
def test_a_file_it_cannot_rewrite_safely_is_an_error_and_left_untouched(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ValueError):
        remember_setting(path, "theme", "dracula")
    assert path.read_text() == text
    assert os.listdir(tmp_path) == ["config.toml"]


def test_a_symlinked_file_is_written_where_it_points(tmp_path):
    target = tmp_path / "dotfiles" / "phasetop.toml"
    target.parent.mkdir()
    target.write_text(USER_FILE)
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    remember_setting(link, "theme", "gruvbox")
    assert link.is_symlink()
    assert 'theme = "gruvbox"' in target.read_text()
