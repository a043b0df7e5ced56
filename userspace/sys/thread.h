// Thread placement.
#pragma once

#include <cstdint>

namespace npf {

// Pins the calling thread to `cpu` (-1: leaves it where it is); warns naming
// `who` if the kernel refuses.
void pinThread(int cpu, const char* who) noexcept;

// Asks the scheduler (EEVDF, Linux 6.12) for a time slice of `ns` for the
// calling thread instead of the default (about 3 ms): a thread others wait
// for gets an earlier deadline, so when it wakes it runs within about `ns`
// instead of after a busy thread's whole slice. Needs no privilege; an
// older kernel ignores it. Only for a thread of the normal policy (a
// real-time, batch or idle one keeps its own): false otherwise, quietly.
bool shortSlice(uint64_t ns) noexcept;

} // namespace npf
