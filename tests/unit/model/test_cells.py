"""A cell's name from its text: the same as the one ipykernel compiles it under."""

from __future__ import annotations

import random

from ipykernel.compiler import get_tmp_hash_seed
from ipykernel.compiler import murmur2_x86 as ipykernel_murmur2

from trainium_lens.model.cells import cell_file, is_cell_file, murmur2_x86


def test_the_hash_is_ipykernels_for_every_length_and_any_text() -> None:
    rng = random.Random(7)
    texts = ["", "a", "ab", "abc", "abcd", "héllo ✓", "%%trainium_lens\nout = model(x)\n"]
    texts += ["".join(rng.choice("ab\n€x é") for _ in range(rng.randint(0, 40))) for _ in range(300)]
    for text in texts:
        assert murmur2_x86(text) == ipykernel_murmur2(text, get_tmp_hash_seed()), repr(text)


def test_a_cells_file_changes_with_its_text() -> None:
    a, b = cell_file("x = 1"), cell_file("x = 2")
    assert a != b and is_cell_file(a) and not is_cell_file("model.py")
    assert a == f"ipykernel-cell/{ipykernel_murmur2('x = 1', get_tmp_hash_seed())}.py"
