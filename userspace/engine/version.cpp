// npf/version.h: the version this library was built as.
#include "npf/version.h"

#include "npf/abi.h"

extern "C" const char* npf_version(void) { return NPF_VERSION_STRING; }

extern "C" unsigned npf_abi_version(void) { return NPF_ABI_VERSION; }
