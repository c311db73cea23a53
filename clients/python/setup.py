"""Builds with `sync.py` written anew from `aio.py` (see `unasync.py`):
the blocking client is generated from the asyncio one. Everything else is
in pyproject.toml."""

import importlib.util
import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py

_HERE = pathlib.Path(__file__).resolve().parent


class BuildPy(build_py):
    def run(self) -> None:
        spec = importlib.util.spec_from_file_location("unasync", _HERE / "unasync.py")
        assert spec is not None and spec.loader is not None
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
        gen.main([])
        super().run()


setup(cmdclass={"build_py": BuildPy})
