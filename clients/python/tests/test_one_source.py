"""Issue 24: one Python source. `padlock.sync` is what `unasync.py` writes
from `padlock.aio`, and it is a blocking module all through."""

import importlib.util
import inspect
import pathlib

import pytest

import padlock.aio
import padlock.sync

HERE = pathlib.Path(__file__).resolve().parents[1]


def _unasync():
    spec = importlib.util.spec_from_file_location("unasync", HERE / "unasync.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sync_is_generated_from_aio_and_current():
    gen = _unasync()
    package = pathlib.Path(padlock.sync.__file__).parent
    assert ("aio.py", "sync.py") in gen.PAIRS
    for source, target in gen.PAIRS:
        want = gen.convert((HERE / "src/padlock" / source).read_text())
        assert (package / target).read_text() == want, target
        assert "async def" not in want and "await " not in want
    assert gen.main(["--check"]) == 0


def test_the_blocking_module_has_no_coroutines_and_the_same_classes():
    for name in ("Lock", "Semaphore", "MultiLock", "RwHold", "ReadWriteLock"):
        a, s = getattr(padlock.aio, name), getattr(padlock.sync, name)
        public = {m for m in dir(a) if (not m.startswith("_") or m in ("__aenter__", "__aexit__")) and m != "cancel_on_loss"}
        assert {m.replace("__aenter__", "__enter__").replace("__aexit__", "__exit__") for m in public} <= set(dir(s))
        for m in dir(s):
            assert not inspect.iscoroutinefunction(getattr(s, m)), f"{name}.{m} is async in padlock.sync"
    for f in ("graph", "top"):
        assert inspect.iscoroutinefunction(getattr(padlock.aio, f))
        assert not inspect.iscoroutinefunction(getattr(padlock.sync, f))
    # asyncio's own: task cancellation on loss.
    assert "cancel_on_loss" in inspect.signature(padlock.aio.Lock).parameters
    assert "cancel_on_loss" not in inspect.signature(padlock.sync.Lock).parameters
    assert "asyncio" not in pathlib.Path(padlock.sync.__file__).read_text().split('"""')[2]


def test_the_markers():
    gen = _unasync()
    src = ('"""a"""\n# aio {\nx = 1\n# aio }\n#sync| y = 2\nasync def f():\n'
           '    await g()  # aio\n    async with h() as v:\n        return await v\n')
    assert gen.convert(src) == '"""a"""\ny = 2\ndef f():\n    with h() as v:\n        return v\n'
    # An `async` the rules cannot turn (split across lines) is refused, not
    # left in the blocking text.
    for bad in ("# aio {\n", "# aio }\n", "# aio {\n# aio {\n", '"""`async\nwith` x"""\n'):
        with pytest.raises(SystemExit):
            gen.convert(bad)
