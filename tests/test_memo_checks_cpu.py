"""A memoized problem skips the memory checks for the pointer set of its last call that passed them: a call with the
same pointers but other sizes (another problem) must still be checked. Each case below passes once, then comes back
with every pointer equal and larger views, so the skip would be wrong were the memo keyed on pointers alone."""
from test_host_path_cpu import STUBS, run_with_cpu_stubs

SCRIPT = STUBS + r'''
import cake_rt
from cake_rt.interop import BF16

def at(buf, offset, shape, dtype):
    """A C-contiguous view of ``buf`` (bytes) at ``offset`` bytes."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return buf[offset:offset + n].view(dtype).reshape(shape)

# ---- SSD: x, then out right after it; twice as many tokens at the same addresses make out overlap x.
H, P, N = 4, 64, 64
big = make(np.empty(1 << 22, np.uint8))
def ssd_views(L):
    x = at(big, 0, (1, L, H, P), BF16)
    y = at(big, 256 * H * P * 2, (1, L, H, P), BF16)             # just past a 256-token x
    dt = at(big, 1 << 21, (1, L, H), np.float32)
    B = at(big, (1 << 21) + (1 << 20), (1, L, 1, N), BF16)
    A = at(big, (1 << 22) - 4096, (H,), np.float32)
    return x, dt, A, B, y
x, dt, A, B, y = ssd_views(256)
for _ in range(2):
    cake_rt.ssd_combined(x, dt, A, B, B, 64, out=y, stream=s)
x2, dt2, A2, B2, y2 = ssd_views(512)
assert [a.data.ptr for a in (x, dt, A, B, y)] == [a.data.ptr for a in (x2, dt2, A2, B2, y2)]
for _ in range(2):
    refused(lambda: cake_rt.ssd_combined(x2, dt2, A2, B2, B2, 64, out=y2, stream=s), "out: its memory overlaps x")

# ---- DSA: indices, then scores right after them; a larger topk at the same addresses makes them overlap.
T, Tkv = 64, 300
q = make(np.empty((T, 32, 128), BF16)); k = make(np.empty((Tkv, 128), BF16)); w = make(np.empty((T, 32), np.float32))
out = make(np.empty(1 << 16, np.uint8))
idx, sc = at(out, 0, (T, 16), np.int32), at(out, T * 16 * 4, (T, 16), np.float32)
for _ in range(2):
    cake_rt.dsa_indexer_det_topk(q, k, w, 16, indices=idx, scores=sc, stream=s)
idx2, sc2 = at(out, 0, (T, 32), np.int32), at(out, T * 16 * 4, (T, 32), np.float32)
for _ in range(2):
    refused(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, 32, indices=idx2, scores=sc2, stream=s),
            "scores: its memory overlaps indices")

# ---- DSA: a caller's workspace that passed, then a shorter one at the same address.
need = cake_rt.dsa_indexer_workspace_bytes(q, k, w, 16, key_split=64)
assert need > 16
ws_buf = make(np.empty(need, np.uint8))
for _ in range(2):
    cake_rt.dsa_indexer_det_topk(q, k, w, 16, indices=idx, scores=sc, workspace=ws_buf, key_split=64, stream=s)
for _ in range(2):
    refused(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, 16, indices=idx, scores=sc, workspace=ws_buf[:need - 16],
                                                 key_split=64, stream=s), "workspace: expected at least")
print("ok")
'''


def test_same_pointers_with_other_sizes_are_checked_again():
    run_with_cpu_stubs(SCRIPT)
