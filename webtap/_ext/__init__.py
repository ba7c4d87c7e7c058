"""Compiled Cython modules of webtap, built from ../../ext/*.pyx (see ext/meson.build)."""
