"""ext/url/urlcanon.h + ext/url/urlcanon.c are self-contained C (the URL modules link them from the wtc
library and call them in their nogil loops). Compile a small C program with them alone and check
it agrees with Python."""
import shutil
import subprocess
from pathlib import Path

import pytest

from urlfilter.canon import canonicalize, to_key

EXT = Path(__file__).resolve().parents[2] / "ext"
INCLUDES = [f"-I{d}" for d in sorted(EXT.iterdir()) if d.is_dir()]

PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include "urlcanon.h"
int main(int argc, char **argv) {
    static uint8_t out[1 << 16];
    for (int i = 1; i < argc; i++) {
        for (int key = 0; key < 2; key++) {
            ptrdiff_t n = webtap_canon((const uint8_t *)argv[i], strlen(argv[i]), out, sizeof out,
                                       key ? CANON_KEY : 0);
            if (n < 0) printf("ERR %d\n", (int)n); else printf("%.*s\n", (int)n, out);
        }
    }
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_canon_compiles_alone_and_agrees(tmp_path):
    src = tmp_path / "t.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "t"
    subprocess.run(["cc", "-std=gnu11", "-O2", "-Wall", "-Werror", *INCLUDES, str(src), str(EXT / "url" / "urlcanon.c"), "-o", str(exe)], check=True)
    urls = ["HTTP://WWW.Example.com:80/a/./b/../c//d?x#y", "bank.com@evil.net", "a.com:99999/", "x.org/%7e%zz"]
    lines = subprocess.run([str(exe), *urls], capture_output=True, text=True, check=True).stdout.splitlines()
    for i, u in enumerate(urls):
        try:
            want = [canonicalize(u), to_key(u).decode()]
        except ValueError:
            want = [lines[2 * i], lines[2 * i + 1]]
            assert want[0].startswith("ERR")
        assert lines[2 * i:2 * i + 2] == want
