// Ticket-word work distribution. Every CTA draws unit numbers with one atomicAdd until it draws one
// >= nunits. Exactly gridDim failing draws happen, so the CTA whose failing ticket equals
// nunits + nctas - 1 drew last: every other CTA has finished drawing, and it resets the word to 0.
// A completed launch therefore leaves the word at 0 and no call pays for a memset.
#pragma once
#include "types.cuh"

// Thread 0 draws; the value is broadcast through `slot` (a __shared__ unsigned). All threads call it.
CAKE_DEVICE unsigned ticket_draw(unsigned* word, unsigned* slot) {
    __syncthreads();  // everyone has read the previous ticket from `slot`
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        *slot = atomicAdd(word, 1u);
    }
    __syncthreads();
    return *slot;
}

// Call once per CTA with its failing ticket (>= nunits), from thread 0 only (or all threads: only one
// CTA ever matches, and the reset is idempotent).
CAKE_DEVICE void ticket_done(unsigned* word, unsigned ticket, unsigned nunits) {
    const unsigned nctas = gridDim.x * gridDim.y * gridDim.z;
    if (ticket == nunits + nctas - 1) {
        atomicExch(word, 0u);
    }
}
