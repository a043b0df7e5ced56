// The logger is part of libnpf's public API (npf/log.h); internal code keeps
// including it as sys/log.h.
#pragma once

#include "npf/log.h"
