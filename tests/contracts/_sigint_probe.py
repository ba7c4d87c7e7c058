"""Run by test_sigint_default.py in a pytest started with SIGINT ignored (not collected alone)."""
import signal


def test_sigint_is_pythons_default():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
