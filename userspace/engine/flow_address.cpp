// npf/error.h's checkFlowAddress: the flow address check openFlow makes
// (dataplane/flows.h), for a program to make before it attaches anything.
#include "npf/error.h"

#include "dataplane/flows.h"

namespace npf {

void checkFlowAddress(const std::string& addr)
{
    dataplane::parseFlowSpec("1", addr); // any valid port: only the address is checked
}

} // namespace npf
