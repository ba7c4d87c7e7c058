"""Compiled Cython modules of webtap, built from ../../ext/<stage>/*.pyx (see ext/meson.build).

WEBTAP_EXT_DIR=<dir> loads the modules from <dir> instead (a separately built copy, e.g. the
sanitizer build of ``make sanitize`` or the fuzzing build of ``make fuzz``, docs/ROBUSTNESS.md).
"""
import os as _os

_override = _os.environ.get("WEBTAP_EXT_DIR")
if _override:
    import importlib.machinery as _machinery
    import importlib.util as _util
    import sys as _sys

    class _ExtDirFinder:
        """webtap._ext.<name> from WEBTAP_EXT_DIR, ahead of the editable install's finder."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            if not name.startswith(__name__ + "."):
                return None
            short = name[len(__name__) + 1:]
            for suffix in _machinery.EXTENSION_SUFFIXES:
                f = _os.path.join(_override, short + suffix)
                if _os.path.exists(f):
                    return _util.spec_from_file_location(name, f)
            return None

    _sys.meta_path.insert(0, _ExtDirFinder)
