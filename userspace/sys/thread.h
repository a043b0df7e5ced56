// Thread placement.
#pragma once

namespace npf {

// Pins the calling thread to `cpu` (-1: leaves it where it is); warns naming
// `who` if the kernel refuses.
void pinThread(int cpu, const char* who) noexcept;

} // namespace npf
