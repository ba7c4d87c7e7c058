# cython: freethreading_compatible = False
"""Capture stage: packet batches from offline files and live interfaces (work in progress)."""
from libpcap cimport pcap_lib_version

def libpcap_version():
    """The version string of the libpcap this module is linked against."""
    return pcap_lib_version().decode()
