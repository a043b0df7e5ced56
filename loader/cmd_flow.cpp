// npfctl flow add / del / list
#include <cstdio>

#include "cli/exit_codes.h"
#include "cli/json.h"
#include "counters/engine_stats.h"
#include "commands.h"
#include "dataplane/dataplane.h"
#include "dataplane/flows.h"
#include "format.h"

namespace npf::cli {

int cmdFlowAdd(const Options& opt)
{
    dataplane::FlowSpec f = dataplane::parseFlowSpec(opt.port, opt.addr);
    dataplane::Dataplane dp = dataplane::Dataplane::open(opt.ifname);
    dataplane::FlowEntry e = dataplane::addFlow(dp, f);
    std::printf("added flow %u on %s: %s\n", e.id, opt.ifname.c_str(), dataplane::toString(f).c_str());
    return kExitOk;
}

int cmdFlowDel(const Options& opt)
{
    dataplane::FlowSpec f = dataplane::parseFlowSpec(opt.port, opt.addr);
    dataplane::Dataplane dp = dataplane::Dataplane::open(opt.ifname);
    dataplane::delFlow(dp, f);
    std::printf("deleted flow on %s: %s\n", opt.ifname.c_str(), dataplane::toString(f).c_str());
    return kExitOk;
}

int cmdFlowList(const Options& opt)
{
    dataplane::Dataplane dp = dataplane::Dataplane::open(opt.ifname);
    const std::vector<FlowRow> rows = flowRows(dataplane::listFlows(dp), counters::engineFlows(opt.ifname));
    if (opt.json) {
        Json j{{"interface", opt.ifname}, {"flows", toJson(rows)}};
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::fputs(flowTable(rows).c_str(), stdout);
    }
    return kExitOk;
}

} // namespace npf::cli
