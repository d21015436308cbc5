"""CPU: ``scripts/ssd-split-heads`` (issue #13's wave-shape experiment) starts, and its split of the heads fills whole
waves of exact-scan CTAs with whole groups."""
import pytest


def test_help(script_help):
    assert "exact" in script_help("ssd-split-heads")


@pytest.mark.parametrize("batch, nheads, ngroups, sms, per_sm, want", [
    (8, 80, 1, 132, 2, 66),     # m2-2.7b-b8 on the H200: 528 of 640 items, two whole waves of 264 CTAs
    (1, 128, 8, 132, 2, 128),   # every item fits one wave: no chunk-parallel tail
    (8, 80, 8, 132, 2, 0),      # groups of 10 heads: 8 K is never a multiple of 264
    (4, 100, 4, 100, 1, 100),   # 400 items: four whole waves of 100, no tail
    (4, 100, 4, 120, 1, 0),     # groups of 25: 4 K in {100, 200, 300} is never a multiple of 120
    (4, 100, 4, 150, 1, 75),    # groups of 25: 4 * 75 = 300, two whole waves of 150
    (3, 50, 1, 32, 2, 0),       # 3 K a multiple of 64 slots needs K = 64 > 50: no whole wave
])
def test_split_heads(load_script, batch, nheads, ngroups, sms, per_sm, want):
    k = load_script("ssd-split-heads").split_heads(batch, nheads, ngroups, sms, per_sm)
    assert k == want
    slots, step = sms * per_sm, (nheads // ngroups if ngroups > 1 else 1)
    assert 0 <= k <= nheads and k % step == 0
    assert k == nheads or (batch * k) % slots == 0
